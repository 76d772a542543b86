#!/usr/bin/env python3
"""tokens_check.py DUMP_DIR PAD MODEL...: check the tokens of `sharc read --dump-dir` batches
against Python sentencepiece.

Each MODEL is PATH (one model for every cut) or LANG=PATH (NeMo's AggregateTokenizer: the
ids of LANG's model offset by the vocabulary sizes of the models before it). For every
batch, row i of tokens [B, L] must be encode_as_ids(text of row i) (+ its language's offset)
followed by PAD up to L, and token_lens[i] the number of ids. Prints the rows checked.
"""
import glob
import os
import sys

import numpy as np
import sentencepiece as spm


def column(d, step, name, i):
    off = np.load(f"{d}/step{step}.{name}_offsets.npy")
    data = np.load(f"{d}/step{step}.{name}_bytes.npy").tobytes()
    return data[off[i] : off[i + 1]].decode("utf-8")


def main():
    d, pad, specs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    models, offset = {}, 0
    for spec in specs:
        lang, _, path = spec.rpartition("=")
        sp = spm.SentencePieceProcessor(model_file=path)
        models[lang or None] = (sp, offset)
        offset += sp.get_piece_size()
    steps = sorted(int(os.path.basename(p)[4:].split(".")[0]) for p in glob.glob(f"{d}/step*.tokens.npy"))
    rows = 0
    for step in steps:
        tokens = np.load(f"{d}/step{step}.tokens.npy")
        lens = np.load(f"{d}/step{step}.token_lens.npy")
        assert tokens.dtype == np.int32 and lens.dtype == np.int32, (tokens.dtype, lens.dtype)
        assert tokens.shape[0] == lens.shape[0]
        assert tokens.shape[1] == (lens.max() if len(lens) else 0), (tokens.shape, lens)
        for i in range(tokens.shape[0]):
            text = column(d, step, "text", i)
            sp, off = models[None] if None in models else models[column(d, step, "language", i)]
            want = [x + off for x in sp.encode_as_ids(text)]
            got = tokens[i, : lens[i]].tolist()
            if got != want:
                sys.exit(f"step {step} row {i} ({text!r}): tokens {got}, sentencepiece {want}")
            if any(x != pad for x in tokens[i, lens[i] :].tolist()):
                sys.exit(f"step {step} row {i}: padding {tokens[i, lens[i]:].tolist()} is not {pad}")
            rows += 1
    if rows == 0:
        sys.exit(f"no tokens in {d}")
    print(rows)


if __name__ == "__main__":
    main()
