"""Diffuser's own attention pattern, reproduced bit for bit (``SequencePattern(compat="diffuser")``).

Diffuser (github asFeng/Diffuser, ``graphtrainer.py``, ``graphTrainer._create_adj_mat``) builds one
dense ``max_len x max_len`` matrix (``max_len = 4096``) once per process:

1. the overlapping windows: blocks ``[i*h, i*h + 2h)`` for ``i < max_len // h - 1``, ``h = window // 2``;
2. ``np.random.seed(seed)`` and ``max_len * num_rand`` cells drawn by ``np.random.choice(range(max_len**2),
   ..., replace=False)``; cell ``c`` is the edge ``c % max_len -> c // max_len`` (source -> query);
3. ``num_glob`` global tokens by ``np.random.choice(range(window, max_len), ..., replace=False)`` from
   the same stream: their rows and columns are full;

and a sequence of ``k`` tokens uses the top-left ``k x k`` block (``np.nonzero(adj[:k, :k])``):
the prefix rule. ``np.random.choice`` without replacement is a full legacy shuffle of the
population followed by a slice, so the same cells come from ``RandomState(seed).shuffle`` of an
``arange`` (the shuffle's draws do not depend on the dtype: int32 halves the memory). Nothing
here is ``max_len x max_len`` except that one-off shuffle (``4 * max_len**2`` bytes: 64 MiB at 4096),
done once per configuration and kept.
"""

from __future__ import annotations

import functools

import numpy as np

__all__ = ["diffuser_pattern", "diffuser_prefix"]


def _window_pairs(max_len: int, window: int):
    """``(query, key)`` of Diffuser's block windows (``|q//h - k//h| <= 1``, both chunks below
    ``max_len // h``), row-major."""
    half = window // 2
    n_blocks = max_len // half - 1
    top_chunk = n_blocks  # the last chunk any block reaches
    tokens = np.arange(max_len, dtype=np.int64)
    chunk = tokens // half
    lo = np.maximum(chunk - 1, 0) * half
    hi = np.minimum(chunk + 2, top_chunk + 1) * half
    covered = chunk <= top_chunk
    lo = np.where(covered, lo, 0)
    hi = np.where(covered, np.minimum(hi, max_len), 0)
    counts = hi - lo
    query = np.repeat(tokens, counts)
    starts = np.repeat(lo - np.concatenate(([0], np.cumsum(counts)[:-1])), counts)
    key = np.arange(query.shape[0], dtype=np.int64) + starts
    return query, key


@functools.lru_cache(maxsize=4)
def diffuser_pattern(max_len: int, window: int, num_random: int, num_global: int, seed: int):
    """``(indptr, indices, global_ids)`` of Diffuser's full ``max_len`` pattern as an in-CSR (row =
    query = Diffuser's edge destination), int64, rows sorted; cached per configuration."""
    rs = np.random.RandomState(seed)
    cells = np.arange(max_len * max_len, dtype=np.int32 if max_len * max_len < 2**31 else np.int64)
    rs.shuffle(cells)  # == np.random.choice(range(max_len**2), size, replace=False) after the slice
    cells = cells[: max_len * num_random].astype(np.int64)
    rand_query, rand_key = cells // max_len, cells % max_len
    glob = rs.permutation(max_len - window)[:num_global].astype(np.int64) + window
    w_query, w_key = _window_pairs(max_len, window)
    everyone = np.arange(max_len, dtype=np.int64)
    g_rows_q = np.repeat(glob, max_len)
    g_rows_k = np.tile(everyone, glob.shape[0])
    g_cols_q = np.repeat(everyone, glob.shape[0])
    g_cols_k = np.tile(glob, max_len)
    code = np.concatenate(
        [
            w_query * max_len + w_key,
            rand_query * max_len + rand_key,
            g_rows_q * max_len + g_rows_k,
            g_cols_q * max_len + g_cols_k,
        ]
    )
    code = np.unique(code)
    query, key = code // max_len, code % max_len
    indptr = np.zeros(max_len + 1, np.int64)
    np.cumsum(np.bincount(query, minlength=max_len), out=indptr[1:])
    return indptr, key, np.sort(glob)


def diffuser_prefix(full, length: int):
    """``(indptr, indices, global_ids)`` of the top-left ``length x length`` block of ``full``."""
    indptr, indices, glob = full
    rows_end = int(indptr[length])
    keys = indices[:rows_end]
    keep = keys < length
    row_of = np.repeat(np.arange(length, dtype=np.int64), np.diff(indptr[: length + 1]))
    counts = np.bincount(row_of[keep], minlength=length)
    out_ptr = np.zeros(length + 1, np.int64)
    np.cumsum(counts, out=out_ptr[1:])
    return out_ptr, keys[keep], glob[glob < length]
