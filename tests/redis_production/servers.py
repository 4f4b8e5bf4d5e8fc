"""Private Redis servers for the production-Redis tests: with a password and an ACL user, with
TLS, and a master with a replica watched by a Sentinel. Never the shared Redis on 6379."""

import datetime
import ipaddress
import shutil
import subprocess
import time
from pathlib import Path

import redis
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.chaos.redis_server import free_port

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


class Server:
    """One redis-server (or Sentinel) process on a free port, stopped by its own pid."""

    def __init__(self, log_dir: Path, name: str, argv: list[str], *, port: int, client: dict):
        self.name, self.port, self.client_options = name, port, client
        self.log_path = Path(log_dir) / f"{name}.log"
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen([REDIS_SERVER, *argv], stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True, cwd=log_dir)
        self._wait_until_answering()

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5, **self.client_options)

    def _wait_until_answering(self, timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise AssertionError(f"{self.name} exited:\n{self.log_path.read_text(errors='replace')}")
            try:
                if self.client().ping():
                    return
            except redis.RedisError:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(10)


def plain_args(port: int, log_dir: Path) -> list[str]:
    return ["--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--daemonize", "no", "--dir", str(log_dir)]


def password_server(log_dir: Path, *, password: str, user: str, user_password: str) -> Server:
    """requirepass for the default user, and an ACL user allowed everything."""
    port = free_port()
    argv = [*plain_args(port, log_dir), "--requirepass", password,
            "--user", user, "on", f">{user_password}", "~*", "&*", "+@all"]
    return Server(log_dir, "password", argv, port=port, client={"password": password})


def tls_args(port: int, certs: dict) -> list[str]:
    """TLS only (no plain port); clients, replicas and Sentinels must show a certificate the CA
    signed (the servers show their own: it has no usage that forbids a client's)."""
    return ["--port", "0", "--tls-port", str(port), "--tls-cert-file", str(certs["server_cert"]),
            "--tls-key-file", str(certs["server_key"]), "--tls-ca-cert-file", str(certs["ca"]),
            "--tls-auth-clients", "yes", "--tls-replication", "yes"]


def tls_client(certs: dict) -> dict:
    return {"ssl": True, "ssl_ca_certs": str(certs["ca"]), "ssl_certfile": str(certs["client_cert"]),
            "ssl_keyfile": str(certs["client_key"])}


def tls_server(log_dir: Path, certs: dict, *, password: str) -> Server:
    port = free_port()
    argv = [*plain_args(port, log_dir), *tls_args(port, certs), "--requirepass", password]
    return Server(log_dir, "tls", argv, port=port, client={"password": password, **tls_client(certs)})


def replicated_servers(log_dir: Path, *, password: str, certs: dict | None = None) -> tuple[Server, Server]:
    """A master and its replica, both asking for the same password (so either can be promoted)."""
    auth = ["--requirepass", password, "--masterauth", password]
    master_port, replica_port = free_port(), free_port()
    master_tls = tls_args(master_port, certs) if certs else []
    replica_tls = tls_args(replica_port, certs) if certs else []
    client = {"password": password, **(tls_client(certs) if certs else {})}
    master = Server(log_dir, "master", [*plain_args(master_port, log_dir), *auth, *master_tls],
                    port=master_port, client=client)
    replica = Server(log_dir, "replica", [*plain_args(replica_port, log_dir), *auth, *replica_tls,
                                          "--replicaof", "127.0.0.1", str(master_port)],
                     port=replica_port, client=client)
    return master, replica


def sentinel(log_dir: Path, master: Server, *, name: str, password: str, own_password: str,
             certs: dict | None = None) -> Server:
    """A Sentinel watching `master` (it finds the replicas itself); it rewrites its own config file."""
    port = free_port()
    config = Path(log_dir) / "sentinel.conf"
    lines = [f"port {port}", "bind 127.0.0.1", f"dir {log_dir}", f"requirepass {own_password}",
             f"sentinel monitor {name} 127.0.0.1 {master.port} 1",
             f"sentinel auth-pass {name} {password}",
             f"sentinel down-after-milliseconds {name} 1000",
             f"sentinel failover-timeout {name} 5000"]
    if certs:
        lines[0] = f"port 0\ntls-port {port}"
        lines += [f"tls-cert-file {certs['server_cert']}", f"tls-key-file {certs['server_key']}",
                  f"tls-ca-cert-file {certs['ca']}", "tls-auth-clients yes", "tls-replication yes"]
    config.write_text("\n".join([*lines, ""]))
    client = {"password": own_password, **(tls_client(certs) if certs else {})}
    return Server(log_dir, "sentinel", [str(config), "--sentinel"], port=port, client=client)


def make_certificates(directory: Path) -> dict:
    """A throwaway CA, a server certificate for 127.0.0.1 and localhost, and a client certificate."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "hub test CA")])
    ca_cert = (_builder(ca_name, ca_name, ca_key)
               .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                            content_commitment=False, key_encipherment=False,
                                            data_encipherment=False, key_agreement=False,
                                            encipher_only=False, decipher_only=False), critical=True)
               .sign(ca_key, hashes.SHA256()))
    paths = {"ca": _write_cert(directory / "ca.crt", ca_cert)}
    for role, names in (("server", [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
                        ("client", [x509.DNSName("hub-client")])):
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"hub test {role}")])
        cert = (_builder(subject, ca_name, key)
                .add_extension(x509.SubjectAlternativeName(names), critical=False)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .sign(ca_key, hashes.SHA256()))
        paths[f"{role}_cert"] = _write_cert(directory / f"{role}.crt", cert)
        paths[f"{role}_key"] = directory / f"{role}.key"
        paths[f"{role}_key"].write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                           serialization.PrivateFormat.TraditionalOpenSSL,
                                                           serialization.NoEncryption()))
    return paths


def _builder(subject, issuer, key) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1)))


def _write_cert(path: Path, cert) -> Path:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path
