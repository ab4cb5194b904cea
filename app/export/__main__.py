"""`python -m app.export TRACE --html OUT --gif OUT --webm OUT`: a race trace for slides."""

from .cli import main

raise SystemExit(main())
