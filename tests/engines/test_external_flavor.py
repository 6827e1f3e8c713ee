"""engine=external: what the endpoint is, asked of it (fixtures served over a real socket), and the
checks before anything is measured."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from specexp.config import Config, ConfigError, DrafterConfig, ModelConfig, NcclConfig, TrackingConfig, WorkloadConfig
from specexp.engines.external import ExternalEngine, ExternalEngineConfig, detect

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MODELS = json.dumps({"object": "list", "data": [{"id": "served-one"}, {"id": "served-two"}]})


@contextmanager
def endpoint(routes: dict[str, str]) -> Iterator[str]:
    """An HTTP server answering GET ``routes`` (path -> body), 404 elsewhere."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = routes.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.end_headers()
            self.wfile.write((body or "not found").encode())

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def vllm_metrics() -> str:
    return (FIXTURES / "vllm" / "metrics_eagle3.txt").read_text()


def sglang_metrics() -> str:
    return json.loads((FIXTURES / "sglang" / "metrics_spec.json").read_text())["after"]


@pytest.mark.parametrize(
    ("routes", "flavor"),
    [
        ({"/metrics": vllm_metrics()}, "vllm"),
        ({"/metrics": sglang_metrics()}, "sglang"),
        ({"/get_server_info": (FIXTURES / "sglang" / "server_info.json").read_text()}, "sglang"),
        ({"/version": json.dumps({"version": "0.32.0"})}, "vllm"),
        ({"/metrics": "# plain prometheus\nprocess_cpu_seconds_total 3.0\n"}, "openai"),
        ({}, "openai"),
    ],
)
def test_the_flavor_is_read_from_what_the_server_publishes(routes: dict[str, str], flavor: str) -> None:
    with endpoint(routes) as url:
        assert detect(url)[0] == flavor


def make_cfg(url: str, **engine: object) -> Config:
    return Config(
        engine=ExternalEngineConfig(url=url, **engine),
        model=ModelConfig(name="tiny", path="/ckpt/target"),
        drafter=DrafterConfig(),
        nccl=NcclConfig(),
        workload=WorkloadConfig(),
        tracking=TrackingConfig(uri="sqlite://"),
        outputs="/tmp/specexp-test",
    )


def test_an_unreachable_url_fails_within_seconds_naming_the_key() -> None:
    start = time.monotonic()
    with pytest.raises(ConfigError) as err:
        ExternalEngine().preflight(make_cfg("http://127.0.0.1:9", model_name="x"), None)
    assert time.monotonic() - start < 10 and err.value.key == "engine.url"


def test_a_model_the_endpoint_does_not_serve_names_what_it_serves() -> None:
    with endpoint({"/v1/models": MODELS}) as url, pytest.raises(ConfigError) as err:
        ExternalEngine().preflight(make_cfg(url, model_name="tiny"), None)
    assert err.value.key == "engine.model_name" and "served-one, served-two" in str(err.value)


def test_a_plain_endpoint_is_measured_with_what_it_offers() -> None:
    with endpoint({"/v1/models": MODELS}) as url:
        cfg = make_cfg(url, model_name="served-two")
        engine = ExternalEngine.for_config(cfg)
        notes = engine.preflight(cfg, None)
        assert engine.flavor(cfg) == "openai" and "token_ids, acceptance, server_latency" in notes[-1]
        assert engine.request_fields(cfg) == {"model": "served-two"}
        assert engine.tags(cfg)["specexp.unavailable"] == "token_ids,acceptance,server_latency"
        assert engine.tags(cfg)["specexp.drafter"] == engine.drafter_label(cfg) == "unknown"


def test_a_vllm_endpoint_gets_token_ids_and_its_counters() -> None:
    with endpoint({"/v1/models": MODELS, "/metrics": vllm_metrics()}) as url:
        cfg = make_cfg(url, model_name="served-one", drafter="eagle3")
        engine = ExternalEngine.for_config(cfg)
        assert engine.request_fields(cfg)["return_token_ids"] is True
        assert engine.drafter_label(cfg) == "eagle3" and "specexp.unavailable" not in engine.tags(cfg)


def test_a_set_flavor_is_not_asked() -> None:
    cfg = make_cfg("http://127.0.0.1:9", flavor="sglang")
    assert ExternalEngine().flavor(cfg) == "sglang"
    with pytest.raises(ConfigError):
        make_cfg("http://127.0.0.1:9", flavor="tgi")
