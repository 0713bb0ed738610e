"""Convert WordNet 3.0's data files into the compact typed graph shipped in the package.

Reads ``data.{noun,verb,adj,adv}`` (format: wndb(5WN), pointer symbols: wninput(5WN)) once and
writes ``<out>/wordnet.npz`` with :func:`numpy.savez_compressed` (plain arrays only, so the
package reads it with ``allow_pickle=False``) plus ``<out>/LICENSE-wordnet.md`` (the WordNet 3.0
licence, which must travel with every copy or derivative, and what was derived).

Usage::

    python tools/convert_wordnet.py [--src ../shared/data/wordnet] [--out gglspeedup/data]

What is derived (``gglspeedup.datasets.load_wordnet`` reads it):

- Nodes: every synset, typed by part of speech (``noun``, ``verb``, ``adjective`` with the
  satellites ``s``, ``adverb``); local ids per type in file order (ascending byte offset).
- Relations: one per ``(source type, pointer, target type)`` that occurs (61), named after
  wninput(5WN) (:data:`POINTER_NAMES`), pointing from the synset holding the pointer to the
  synset it names. Lexical pointers (word to word, source/target field not ``0000``) are lifted
  to the two words' synsets. Exact duplicate edges within a relation are dropped (lifting makes
  them: 377,592 pointers give 364,552 edges); self loops are kept (9, all in ``(noun,
  derivationally_related, noun)``: two words of one synset).
- Label: the synset's lexicographer file number (``lex_filenum``, 45 classes, lexnames(5WN)).
- Feature: the gloss (text after ``|``: definition and examples), lower-cased, cut into
  ``[a-z0-9]+`` tokens, the function words of :data:`STOP_WORDS` dropped, each token hashed with
  ``zlib.crc32(token) % FEATURE_DIM`` into one of 256 buckets; a synset's row is the set of
  buckets its tokens hit (binary bag of words).
- Split: per node type and per label, a seeded (``SPLIT_SEED``) permutation of the synsets:
  ``round(10%)`` validation, ``round(10%)`` test, the rest train (stratified 80/10/10).

Stored arrays (synsets of every type in one sequence, type after type in ``node_types`` order):

``node_types``   <U9 (4,)      ``num_nodes`` int64 (4,); type ``t``'s synset ``i`` is the
                 ``i``-th synset line of its ``data.<pos>`` file
``label``        int8 (N,)     lex_filenum
``split``        int8 (N,)     0 train, 1 validation, 2 test
``x_indptr``     int32 (N + 1,) and ``x_indices`` uint8 (nnz,): row ``i`` has ones at
                 ``x_indices[x_indptr[i]:x_indptr[i + 1]]`` (ascending)
``feature_dim``  int64 ()
``edge_types``   <U (R, 3)     ``(src_type, name, dst_type)``
``edge_counts``  int64 (R,)    edges of each relation, in order
``edge_src``, ``edge_dst``  int32 (E,): local ids, relation after relation, each sorted by
                 ``(dst, src)`` (the order of its CSR)
"""

from __future__ import annotations

import os
import re
import sys
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # tools/_convert.py, also when loaded by path
import _convert

DEFAULT_SRC = _convert.source_folder("wordnet")
DEFAULT_OUT = _convert.PACKAGE_DATA

NODE_TYPES = ("noun", "verb", "adjective", "adverb")
FILES = {"noun": "data.noun", "verb": "data.verb", "adjective": "data.adj", "adverb": "data.adv"}
POS_TYPES = {"n": "noun", "v": "verb", "a": "adjective", "s": "adjective", "r": "adverb"}
FEATURE_DIM = 256
SPLIT_SEED = 0
SPLIT_SHARES = (0.1, 0.1)  # validation, test; the rest trains
_TOKEN = re.compile(r"[a-z0-9]+")
STOP_WORDS = frozenset(
    "a an the of or and to in that with by for is as on from at be it its which who".split()
)  # the most frequent function words of the glosses

# wninput(5WN)'s pointer symbols and names, in its order; relations are stored in this order.
POINTER_NAMES = {
    "!": "antonym",
    "@": "hypernym",
    "@i": "instance_hypernym",
    "~": "hyponym",
    "~i": "instance_hyponym",
    "#m": "member_holonym",
    "#s": "substance_holonym",
    "#p": "part_holonym",
    "%m": "member_meronym",
    "%s": "substance_meronym",
    "%p": "part_meronym",
    "=": "attribute",
    "+": "derivationally_related",
    ";c": "domain_topic",
    "-c": "member_of_domain_topic",
    ";r": "domain_region",
    "-r": "member_of_domain_region",
    ";u": "domain_usage",
    "-u": "member_of_domain_usage",
    "*": "entailment",
    ">": "cause",
    "^": "also_see",
    "$": "verb_group",
    "&": "similar_to",
    "<": "participle_of",
    "\\": "pertainym",  # adjectives: "pertains to noun"; adverbs: "derived from adjective" (below)
}
ADVERB_NAMES = {"\\": "derived_from"}


def _lines(path: str):
    with open(path, encoding="ascii") as handle:
        for line in handle:
            if not line.startswith("  "):  # the licence header: lines start with two spaces
                yield line


def gloss_buckets(gloss: str, dim: int = FEATURE_DIM) -> np.ndarray:
    """The ascending distinct buckets ``zlib.crc32(token) % dim`` of a gloss's tokens (uint8 for
    ``dim <= 256``)."""
    tokens = set(_TOKEN.findall(gloss.lower())) - STOP_WORDS
    return np.unique(np.array([zlib.crc32(t.encode("ascii")) % dim for t in tokens], dtype=np.int64))


def read_wordnet(src: str) -> dict[str, np.ndarray]:
    """The arrays described in the module docstring, from the four ``data.<pos>`` files."""
    offsets, labels, rows, pointers = {}, [], [], []
    for node_type in NODE_TYPES:
        found = []
        for line in _lines(os.path.join(src, FILES[node_type])):
            head, _, gloss = line.partition(" | ")
            fields = head.split()
            offset, lex_filenum, ss_type = int(fields[0]), int(fields[1]), fields[2]
            if POS_TYPES[ss_type] != node_type:
                raise ValueError(f"{FILES[node_type]}: synset {fields[0]} has type {ss_type!r}")
            at = 4 + 2 * int(fields[3], 16)  # skip w_cnt (hex) word / lex_id pairs
            for i in range(int(fields[at])):
                symbol, target, pos, _source_target = fields[at + 1 + 4 * i : at + 5 + 4 * i]
                pointers.append((node_type, symbol, POS_TYPES[pos], offset, int(target)))
            found.append(offset)
            labels.append(lex_filenum)
            rows.append(gloss_buckets(gloss.strip()))
        if found != sorted(found):
            raise ValueError(f"{FILES[node_type]}: synsets are not in byte-offset order")
        offsets[node_type] = np.asarray(found, dtype=np.int64)

    relations: dict[tuple, list] = {}
    for node_type, symbol, target_type, offset, target in pointers:
        name = (ADVERB_NAMES if node_type == "adverb" else {}).get(symbol) or POINTER_NAMES[symbol]
        relations.setdefault((node_type, name, target_type), []).append((offset, target))
    order = list(dict.fromkeys(POINTER_NAMES.values())) + list(ADVERB_NAMES.values())
    edge_types = sorted(
        relations, key=lambda et: (order.index(et[1]), NODE_TYPES.index(et[0]), NODE_TYPES.index(et[2]))
    )
    src_all, dst_all, counts = [], [], []
    for src_type, name, dst_type in edge_types:
        pairs = np.asarray(relations[(src_type, name, dst_type)], dtype=np.int64)
        src = np.searchsorted(offsets[src_type], pairs[:, 0])
        dst = np.searchsorted(offsets[dst_type], pairs[:, 1])
        if not (
            np.array_equal(offsets[src_type][src], pairs[:, 0]) and np.array_equal(offsets[dst_type][dst], pairs[:, 1])
        ):
            raise ValueError(f"relation {(src_type, name, dst_type)}: a pointer names a synset that does not exist")
        codes = np.unique(dst * len(offsets[src_type]) + src)  # sorted by (dst, src), duplicates dropped
        dst, src = np.divmod(codes, len(offsets[src_type]))
        src_all.append(src)
        dst_all.append(dst)
        counts.append(len(codes))

    num_nodes = np.array([len(offsets[t]) for t in NODE_TYPES], dtype=np.int64)
    label = np.asarray(labels, dtype=np.int64)
    x_indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in rows], out=x_indptr[1:])
    return {
        "node_types": np.array(NODE_TYPES),
        "num_nodes": num_nodes,
        "label": label.astype(np.int8),
        "split": stratified_split(label, num_nodes).astype(np.int8),
        "x_indptr": x_indptr.astype(np.int32),
        "x_indices": np.concatenate(rows).astype(np.uint8),
        "feature_dim": np.int64(FEATURE_DIM),
        "edge_types": np.array(edge_types),
        "edge_counts": np.asarray(counts, dtype=np.int64),
        "edge_src": np.concatenate(src_all).astype(np.int32),
        "edge_dst": np.concatenate(dst_all).astype(np.int32),
    }


def stratified_split(label: np.ndarray, num_nodes: np.ndarray, seed: int = SPLIT_SEED) -> np.ndarray:
    """0 (train) / 1 (validation) / 2 (test) per synset: within each node type and label, a seeded
    permutation gives ``round(10%)`` to validation, then ``round(10%)`` to test, the rest to train."""
    split = np.zeros(len(label), dtype=np.int64)
    bounds = np.concatenate(([0], np.cumsum(num_nodes)))
    for t in range(len(num_nodes)):
        rng = np.random.default_rng([seed, t])
        segment = label[bounds[t] : bounds[t + 1]]
        for cls in np.unique(segment):
            members = bounds[t] + np.flatnonzero(segment == cls)
            members = members[rng.permutation(len(members))]
            n_val, n_test = (round(share * len(members)) for share in SPLIT_SHARES)
            split[members[:n_val]] = 1
            split[members[n_val : n_val + n_test]] = 2
    return split


def _license_text(src: str, arrays: dict[str, np.ndarray]) -> str:
    with open(os.path.join(src, "COPYRIGHT"), encoding="utf-8") as handle:
        copyright_text = handle.read()
    licence = copyright_text.split("License: WordNet3.0\n", 1)[1].split("\nFiles:", 1)[0]
    licence = "\n".join("" if line.strip() == "." else line[1:] for line in licence.splitlines())
    counts = ", ".join(f"{n:,} {t}" for t, n in zip(arrays["node_types"].tolist(), arrays["num_nodes"].tolist()))
    return (
        "# Licence of the bundled WordNet data\n\n"
        "`wordnet.npz` is derived by `tools/convert_wordnet.py` from the WordNet 3.0 data files\n"
        "`data.noun`, `data.verb`, `data.adj`, `data.adv` (Princeton University, as shipped in\n"
        "Debian's `wordnet-base` 1:3.0-37). It holds, for every synset ("
        f"{counts}):\n"
        "its part of speech, its lexicographer file number, a hashed bag of\n"
        "words of its gloss (256 buckets, not the text), a train/validation/test assignment, and\n"
        f"its pointers as {len(arrays['edge_types'])} typed relations "
        f"({int(arrays['edge_counts'].sum()):,} edges; lexical pointers lifted to their synsets,\n"
        "duplicates dropped). The words and glosses themselves are not included.\n\n"
        "The WordNet 3.0 licence, copied from the source's copyright file:\n\n"
        "---\n\n"
        "WordNet Release 3.0\n\n" + licence.strip() + "\n"
    )


def convert(src: str = DEFAULT_SRC, out: str = DEFAULT_OUT) -> list[str]:
    """Write ``<out>/wordnet.npz`` and ``<out>/LICENSE-wordnet.md``; return the paths written."""
    arrays = read_wordnet(src)
    return _convert.write(out, {"wordnet.npz": arrays}, "LICENSE-wordnet.md", _license_text(src, arrays))


def main(argv=None) -> int:
    src = (DEFAULT_SRC, "folder with WordNet's data.<pos> files and COPYRIGHT")
    return _convert.main(argv, __doc__, convert, src, (DEFAULT_OUT, "folder to write wordnet.npz into"))


if __name__ == "__main__":
    sys.exit(main())
