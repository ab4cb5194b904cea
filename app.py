"""Launch the SAGE demo: `python app.py` (http://127.0.0.1:7860 by default).

GRADIO_SERVER_NAME / GRADIO_SERVER_PORT choose the address (a Space sets them);
the SAGE_APP_* settings (limits, custom models) are listed in docs/app.md.
`python app.py --mcp` (or SAGE_MCP=1) also serves the app's API as MCP tools
(`race_api`, `replay_api`) at /gradio_api/mcp/ (needs the `gradio[mcp]` extra of requirements.txt).
`python app.py --threads N` (or SAGE_THREADS, OMP_NUM_THREADS, MKL_NUM_THREADS) sets the CPU threads the
models run on; by default each pair's count is chosen by timing its one-token step (`sage_core.threads`).
"""

import argparse
import importlib.util
import os

from app.inputs import MCP_ENV, check_launch_settings, env_switch
from sage_core import SageError
from sage_core.threads import asked_threads

try:  # before Gradio is imported (it reads GRADIO_SERVER_PORT as it loads: a bad one is a traceback) and before
    PORT = check_launch_settings()  # the models load: a bad setting is one sentence within seconds
    asked_threads()  # a bad SAGE_THREADS (or OMP_NUM_THREADS, MKL_NUM_THREADS): one sentence too
except SageError as error:
    raise SystemExit(f"error: {error}") from None

from app.ui import build_demo, launch_options, queued

try:
    demo = build_demo()
except SageError as error:  # a bad SAGE_APP_* setting: one sentence, no traceback
    raise SystemExit(f"error: {error}") from None


def launch_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line: --mcp, --threads."""
    parser = argparse.ArgumentParser(description="Launch the SAGE demo.")
    parser.add_argument("--mcp", action="store_true", help="also serve the API as MCP tools (Gradio's MCP server)")
    parser.add_argument(
        "--threads",
        type=int,
        help="CPU threads the models run on (default: SAGE_THREADS and the like, else chosen per pair by timing)",
    )
    return parser.parse_args(argv)


def mcp_wanted(argv: list[str] | None = None) -> bool:
    """--mcp on the command line, or SAGE_MCP on (1 / on / true / yes; a value that is not on or off stops
    the launch with one sentence)."""
    return bool(launch_arguments(argv).mcp) or env_switch(MCP_ENV)


def threads_wanted(argv: list[str] | None = None) -> None:
    """--threads N on the command line: checked (one sentence when out of range) and handed to every pair's
    load as SAGE_THREADS, which comes before the other variables."""
    threads = launch_arguments(argv).threads
    if threads is not None:
        os.environ["SAGE_THREADS"] = str(asked_threads(threads)[0])


if __name__ == "__main__":
    try:
        mcp = mcp_wanted() or None
        threads_wanted()
    except SageError as error:
        raise SystemExit(f"error: {error}") from None  # None: Gradio's own GRADIO_MCP_SERVER setting still applies
    if mcp and importlib.util.find_spec("mcp") is None:
        raise SystemExit("error: the MCP server needs Gradio's MCP extra: pip install -r requirements.txt")
    queued(demo).launch(
        server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
        server_port=PORT,
        mcp_server=mcp,
        **launch_options(),
    )
