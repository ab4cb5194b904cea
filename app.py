"""Launch the SAGE demo: `python app.py` (http://127.0.0.1:7860 by default).

GRADIO_SERVER_NAME / GRADIO_SERVER_PORT choose the address (a Space sets them);
the SAGE_APP_* settings (limits, custom models) are listed in the README.
"""

import os

from app.ui import build_demo, launch_options, queued

demo = build_demo()

if __name__ == "__main__":
    queued(demo).launch(
        server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
        server_port=int(os.environ.get("GRADIO_SERVER_PORT", "7860")),
        **launch_options(),
    )
