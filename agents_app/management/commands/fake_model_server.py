"""`manage.py fake_model_server`: the fake OpenAI/Anthropic server, for manual use and benchmarks.

Point an agent at it with model `openai:fake-model` and base URL http://127.0.0.1:<port>/v1, or
`anthropic:fake-model` and http://127.0.0.1:<port>. Change its answers while it runs through its
control API, e.g.:

    curl -X POST localhost:8901/_fake/script -d '{"text": "Hi {prompt}", "chunks_per_second": 20}'
    curl -X POST localhost:8901/_fake/queue -d '[{"error": 429}]'
"""

import json

from django.core.management.base import BaseCommand, CommandError

from agents_app.fake_provider import Answer, FakeProvider


class Command(BaseCommand):
    help = "Serve a fake OpenAI-compatible and Anthropic model API on 127.0.0.1 (tests, demos, benchmarks)."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=8901)
        parser.add_argument("--text", default=Answer.text, help="The answer; {prompt} is the user's message.")
        parser.add_argument("--reasoning", default="", help="Reasoning streamed before the answer.")
        parser.add_argument("--chunk-size", type=int, default=Answer.chunk_size, help="Characters per delta.")
        parser.add_argument("--rate", type=float, default=0.0, help="Deltas per second (0: as fast as possible).")
        parser.add_argument("--api-key", default=None, help="Answer 401 to any other key.")
        parser.add_argument("--answer-json", default=None, help="A whole answer as JSON (overrides the above).")

    def handle(self, *args, port, text, reasoning, chunk_size, rate, api_key, answer_json, **options):
        if answer_json:
            try:
                answer = Answer.from_dict(json.loads(answer_json))
            except (ValueError, TypeError) as exc:
                raise CommandError(f"--answer-json is not an answer: {exc}") from None
        else:
            answer = Answer(text=text, reasoning=reasoning, chunk_size=chunk_size, chunks_per_second=rate)
        fake = FakeProvider(answer, port=port, api_key=api_key)
        try:
            fake.start()
        except OSError as exc:
            raise CommandError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror}") from None
        self.stdout.write(
            f"Fake model server on {fake.url} — OpenAI base URL {fake.openai_url}, Anthropic base URL {fake.url}. "
            "Press Ctrl-C to stop."
        )
        try:
            fake.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            fake.stop()
