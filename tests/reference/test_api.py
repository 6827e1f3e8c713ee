"""The HTTP surface and the CLI: errors are 4xx JSON, the server survives them and disconnects."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from specexp.engines.base import Command
from specexp.models.tiny import TinyPaths
from specexp.reference.__main__ import main
from specexp.servers import free_port, spawn, terminate, wait_ready
from tests.conftest import REPO
from tests.reference.client import complete, run, scrape
from tests.reference.conftest import LiveServer


async def models(http: aiohttp.ClientSession, url: str) -> dict:
    async with http.get(url + "/v1/models") as resp:
        return await resp.json()


def test_models_and_health(plain_server: LiveServer) -> None:
    async def go(http: aiohttp.ClientSession):
        async with http.get(plain_server.url + "/health") as resp:
            assert resp.status == 200
        return await models(http, plain_server.url)

    listing = run(go)
    assert listing["object"] == "list" and [m["id"] for m in listing["data"]] == ["tiny"]


@pytest.mark.parametrize(
    ("payload", "status"),
    [
        ({"model": "nope", "prompt": "x"}, 404),
        ({"prompt": "x", "max_tokens": 0}, 400),
        ({"prompt": "x", "max_tokens": -3}, 400),
        ({"prompt": "x", "max_tokens": 2048}, 400),  # prompt + max_tokens > context
        ({"prompt": [5, 99999]}, 400),
        ({"prompt": 12}, 400),
        ({"prompt": []}, 400),
        ({"prompt": "x", "temperature": -1}, 400),
        ({"prompt": "x", "top_p": 0}, 400),
        ({"prompt": "x", "n": 2}, 400),
        (b"{not json", 400),
        (b"[1, 2]", 400),
    ],
)
def test_bad_requests_get_4xx_json_and_the_server_keeps_serving(
    plain_server: LiveServer, payload: dict | bytes, status: int
) -> None:
    async def go(http: aiohttp.ClientSession):
        kwargs = {"data": payload} if isinstance(payload, bytes) else {"json": payload}
        async with http.post(plain_server.url + "/v1/completions", **kwargs) as resp:
            body = await resp.json()
            assert resp.status == status, body
        good = await complete(http, plain_server.url, prompt="ok", max_tokens=3, temperature=0)
        return body, good

    body, good = run(go)
    assert set(body["error"]) == {"message", "type", "code"} and body["error"]["code"] == status
    assert good["usage"]["completion_tokens"] == 3


def test_token_id_prompt_and_defaults(plain_server: LiveServer) -> None:
    out = run(lambda http: complete(http, plain_server.url, prompt=[0, 5, 6, 7], temperature=0))
    assert out["usage"]["prompt_tokens"] == 4
    assert out["usage"]["completion_tokens"] <= 16  # OpenAI's default max_tokens
    assert out["object"] == "text_completion" and out["choices"][0]["finish_reason"] in ("length", "stop")


def test_a_disconnected_stream_is_aborted(plain_server: LiveServer) -> None:
    async def go(http: aiohttp.ClientSession):
        before = await scrape(http, plain_server.url)
        body = {"prompt": "x", "max_tokens": 1500, "temperature": 0, "ignore_eos": True, "stream": True}
        async with http.post(plain_server.url + "/v1/completions", json=body) as resp:
            await resp.content.readline()  # the first event arrived: the request is running
            resp.close()  # drop the connection mid-stream
        # Poll (no timing assertion): the slot must be freed long before 1500 tokens are generated.
        while (now := await scrape(http, plain_server.url))["num_requests_running"] > 0:
            await asyncio.sleep(0.05)
        good = await complete(http, plain_server.url, prompt="still there", max_tokens=2, temperature=0)
        return before, now, good

    before, after, good = run(go)
    assert after["request_success"] == before["request_success"]
    assert after["generation_tokens"] - before["generation_tokens"] < 1500
    assert good["usage"]["completion_tokens"] == 2


def test_sigterm_ends_the_running_streams_and_the_server(tiny: TinyPaths, tmp_path: Path) -> None:
    """SIGTERM (specexp's teardown, or the parent-death signal when specexp is killed) ends the
    requests in flight with an error event and the stream's end, and the server exits: it does not
    wait on handlers whose tokens will never come (an engine once outlived a killed specexp)."""
    port = free_port("127.0.0.1")
    argv = [sys.executable, "-m", "specexp.reference", "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--model", str(tiny.target), "--served-model-name", "tiny", "--threads", "1"]
    argv += ["--max-running-requests", "2", "--num-continuous-decode-steps", "1"]
    process = spawn(Command(argv), tmp_path / "server.log", REPO)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url + "/health", 120, process, tmp_path / "server.log")

        async def go(http: aiohttp.ClientSession) -> str:
            body = {"model": "tiny", "prompt": "x", "max_tokens": 1500, "ignore_eos": True, "stream": True}
            async with http.post(url + "/v1/completions", json=body) as resp:
                await resp.content.readline()  # the request is running
                process.send_signal(signal.SIGTERM)
                return (await resp.read()).decode()

        rest = run(go)
        process.wait(timeout=40)  # aiohttp alone would wait 60 s for the handler, then cut it off
    finally:
        terminate(process)
    assert '"error"' in rest and rest.endswith("data: [DONE]\n\n"), rest[-300:]


def cli(tiny: TinyPaths, *flags: str) -> list[str]:
    base = ["--model", str(tiny.target), "--served-model-name", "tiny", "--host", "127.0.0.1", "--port", "1"]
    base += ["--max-running-requests", "4", "--num-continuous-decode-steps", "1"]
    return [*base, *(f.format(draft=tiny.draft, eagle3=tiny.eagle3) for f in flags)]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--draft-model", "{draft}"], "--num-speculative-tokens"),
        (["--speculative-method", "ngram", "--num-speculative-tokens", "3", "--draft-model", "{draft}"], "ngram"),
        (["--num-speculative-tokens", "3"], "needs --draft-model or --speculative-method"),
        (["--prompt-lookup-max", "2"], "only apply to --speculative-method ngram"),
        (
            [
                "--speculative-method",
                "ngram",
                "--num-speculative-tokens",
                "2",
                "--prompt-lookup-min",
                "3",
                "--prompt-lookup-max",
                "2",
            ],
            "--prompt-lookup-min <= --prompt-lookup-max",
        ),
        (["--max-running-requests", "0"], "--max-running-requests must be >= 1"),
        (["--model", "/nonexistent"], "no config.json"),
        (["--draft-model", "{eagle3}", "--num-speculative-tokens", "3"], "not a LlamaForCausalLM"),
        (["--max-model-len", "4096"], "--max-model-len 4096"),
    ],
)
def test_bad_cli_is_rejected_with_a_message(
    tiny: TinyPaths, flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(cli(tiny, *flags))
    assert exit_info.value.code != 0
    assert message in capsys.readouterr().err


def test_bad_cli_exits_the_process_nonzero(tiny: TinyPaths) -> None:
    argv = [sys.executable, "-m", "specexp.reference", *cli(tiny, "--num-speculative-tokens", "3")]
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "--num-speculative-tokens needs" in proc.stderr, proc.stderr
