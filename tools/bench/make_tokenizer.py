"""Write the offline tokenizer aiperf counts tokens with: one token per whitespace-separated word.

aiperf needs a Hugging Face tokenizer to synthesise prompts of N tokens and to count the tokens a server returns;
by default it downloads the model's tokenizer, which an offline machine cannot. This builds a WordLevel tokenizer
(Hugging Face `tokenizers`) whose vocabulary is every word of the corpus aiperf itself ships for synthetic prompts
(aiperf/dataset/generator/assets/shakespeare.txt), so prompts stay readable English and a "token" is one word:
about 1.3 tokens of a BPE model's vocabulary. Run by tools/bench/setup.sh with the tool venv's python:

    tools/bench/.venv/bin/python tools/bench/make_tokenizer.py tools/bench/tokenizer
"""

from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path

from tokenizers import Tokenizer, models, pre_tokenizers

UNKNOWN = "[UNK]"


def main(out: Path) -> None:
    corpus = resources.files("aiperf.dataset.generator").joinpath("assets/shakespeare.txt").read_text("utf-8")
    words = sorted(set(corpus.split()))
    vocab = {UNKNOWN: 0} | {word: index for index, word in enumerate(words, start=1)}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNKNOWN))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    out.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(out / "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": UNKNOWN, "model_max_length": 1 << 20}
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
