"""Tree masks: which scratch entries each new token sees, and the additive 4D mask built from that.

A new entry sees its parent's entries and itself (EAGLE's rule). The rows are built on the
device from one small tensor of parent indices (`rows_from_parents`), or on the host with numpy
for a model on the CPU (`rows_on_host`, `tree_mask_on_host`). The mask is additive float
(0 = attend, the dtype's minimum = blocked): a bool mask is silently wrong under eager attention.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch


def in_batch_depth(parents: Sequence[int], scratch: int) -> int:
    """The longest chain of new tokens whose parents are new tokens too (0 when none is)."""
    depth: list[int] = []
    for parent in parents:
        depth.append(depth[parent - scratch] + 1 if parent >= scratch else 0)
    return max(depth, default=0)


def rows_from_parents(known: torch.Tensor | None, parents: torch.Tensor, depth: int) -> torch.Tensor:
    """The scratch rows after N new entries, built on the device: (S+N, S+N) bool.

    `known`: the (S, S) rows of the cached scratch; `parents`: (N,) indices
    over the S+N entries, -1 for none. A new entry's row is its parent's row
    plus itself (EAGLE's rule). Parents that are new entries themselves are
    resolved by pointer jumping: after k rounds a row holds the rows of the
    entries fewer than 2^k steps up, so `depth` (the longest in-batch chain,
    known on the host) fixes the number of rounds without reading the device.
    """
    scratch, count = (0 if known is None else known.shape[0]), parents.shape[0]
    total = scratch + count
    # rows: [S+N+1, S+N]; the last row is empty and stands for "no parent".
    rows = torch.zeros((total + 1, total), dtype=torch.bool, device=parents.device)
    if known is not None and scratch:
        rows[:scratch, :scratch] = known
    rows[scratch:total, scratch:].fill_diagonal_(True)
    pointer = parents.masked_fill(parents < 0, total)  # [N]: the row each new entry takes in next
    rounds = (depth + 1).bit_length()
    if rounds > 1:
        # jump: [S+N+1]; cached rows are complete already, so they jump to the empty row.
        jump = torch.full((total + 1,), total, dtype=torch.long, device=parents.device)
        jump[scratch:total] = pointer
    for done in range(1, rounds + 1):
        rows[scratch:total] |= rows[pointer]
        if done < rounds:  # twice as far up next round
            pointer, jump = jump[pointer], jump[jump]
    return rows[:total]


def rows_on_host(known: torch.Tensor | None, parents: Sequence[int]) -> torch.Tensor:
    """`rows_from_parents` on the host, for a model on the CPU: (S+N, S+N) bool, from the parents
    as a list (each new entry's parent comes before it)."""
    scratch = 0 if known is None else known.shape[0]
    total = scratch + len(parents)
    rows = np.zeros((total, total), dtype=bool)
    if known is not None and scratch:
        rows[:scratch, :scratch] = known.numpy()
    for i, parent in enumerate(parents):
        row = scratch + i
        if parent >= 0:
            rows[row, : parent + 1] = rows[parent, : parent + 1]  # the rest of the parent's row is empty
        rows[row, row] = True
    return torch.from_numpy(rows)


_BLOCKED_FLOAT32 = np.finfo(np.float32).min  # the additive mask's "blocked"


def tree_mask_on_host(
    known: torch.Tensor | None, parents: Sequence[int], committed: int, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """`rows_on_host` and `additive_mask` in one, for a model on the CPU: the scratch rows
    (S+N, S+N) and the mask (1, 1, N, committed + S + N) of N new tokens, built with numpy."""
    rows = rows_on_host(known, parents)
    if dtype != torch.float32:
        return rows, additive_mask(rows[rows.shape[0] - len(parents) :], committed, dtype)
    host = rows.numpy()
    count, total = len(parents), host.shape[0]
    mask = np.zeros((1, 1, count, committed + total), dtype=np.float32)
    np.copyto(mask[0, 0, :, committed:], _BLOCKED_FLOAT32, where=~host[total - count :])
    return rows, torch.from_numpy(mask)


def additive_mask(rows: torch.Tensor, committed: int, dtype: torch.dtype) -> torch.Tensor:
    """The 4D additive mask (1, 1, N, committed + S + N) of N new tokens from their scratch rows (N, S + N).

    0 = attend, the dtype's minimum = blocked (a bool mask is silently wrong
    under eager attention: it is added to the scores).
    """
    count, width = rows.shape[0], committed + rows.shape[1]
    if rows.device.type == "cpu" and dtype == torch.float32:  # numpy: fewer calls, the same mask
        host = np.zeros((1, 1, count, width), dtype=np.float32)
        host[0, 0, :, committed:][~rows.numpy()] = np.finfo(np.float32).min
        return torch.from_numpy(host)
    mask = torch.zeros((1, 1, count, width), dtype=dtype, device=rows.device)
    mask[0, 0, :, committed:].masked_fill_(~rows, torch.finfo(dtype).min)
    return mask


def windowed(
    mask: torch.Tensor, query_positions: Sequence[int], key_positions: Sequence[int] | torch.Tensor, window: int
) -> torch.Tensor:
    """A sliding-window layer's mask from the full one (1, 1, N, K): each query also blocked from the keys
    `window` or more positions behind it, as transformers' sliding-window masks do (attend while q - k < window).
    `key_positions`: a list, or a tensor (made by `key_positions`, with no Python list as long as the prompt)."""
    queries = torch.tensor(list(query_positions), device=mask.device)[:, None]
    if isinstance(key_positions, torch.Tensor):
        keys = key_positions.to(mask.device)[None, :]
    else:
        keys = torch.tensor(list(key_positions), device=mask.device)[None, :]
    return mask.masked_fill((queries - keys >= window)[None, None], torch.finfo(mask.dtype).min)


def key_positions(committed: int, scratch: Sequence[int], device: torch.device) -> torch.Tensor:
    """Every cache entry's position: the committed entries at their index, then the scratch entries' own."""
    return torch.cat(
        (torch.arange(committed, device=device), torch.tensor(list(scratch), dtype=torch.long, device=device))
    )
