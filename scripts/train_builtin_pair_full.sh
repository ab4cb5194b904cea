#!/usr/bin/env bash
# The built-in pair's whole recipe: scripts/recipe.py runs its stages in order (the table is there; each run's
# history and figures: docs/training-history.md). Kept for the commands the docs name.
#
# Usage: bash scripts/train_builtin_pair_full.sh [--from STAGE|RUN] [--dry-run] [OUT [WORK]]
#   OUT: where the pair goes (default assets/builtin); WORK: the stages' own folders (default OUT-work). Without
#   --from, every stage of the shipped pair from scratch; --from 13 (a run) or --from run13-target (a stage): from
#   there to the end of its recipe. A rerun skips finished stages and resumes.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
exec python "$ROOT/scripts/recipe.py" "$@"
