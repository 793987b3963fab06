"""Writes reviews.csv: 600 short, made-up film reviews labelled pos or neg.

The data of the README's `tfnorm train --data` example: small enough to
train on a laptop CPU in seconds, with string labels, texts of varied length
(some longer than the example's --max-len) and a signal spread over a few
words, partly negated ("not good"), so a bag of single words is not enough
for every review. Deterministic: rerunning writes the same file.

    python examples/data/make_reviews.py
"""

from __future__ import annotations

import csv
import os
import random

GOOD = ["good", "great", "wonderful", "moving", "funny", "clever", "superb", "charming"]
BAD = ["bad", "dull", "boring", "awful", "clumsy", "tedious", "weak", "forgettable"]
SUBJECTS = [
    "the film",
    "this movie",
    "the story",
    "the cast",
    "the ending",
    "the script",
]
FILLERS = [
    "i watched it on a rainy sunday",
    "my friends came along",
    "the cinema was almost empty",
    "it runs a little over two hours",
    "the soundtrack is by a band i had not heard of",
    "it is based on a novel",
    "the trailer gave a different impression",
    "we saw the late show",
]


def review(rng, positive):
    """One review whose overall opinion is `positive`."""
    own, other = (GOOD, BAD) if positive else (BAD, GOOD)
    parts = [f"{rng.choice(SUBJECTS)} was {rng.choice(own)}"]
    if rng.random() < 0.5:
        # A negated word of the other side says the same thing.
        parts.append(f"{rng.choice(SUBJECTS)} was not {rng.choice(other)}")
    if rng.random() < 0.4:
        parts.append(f"and {rng.choice(SUBJECTS)} was {rng.choice(own)} too")
    for _ in range(rng.randint(0, 3)):
        parts.insert(rng.randint(0, len(parts)), rng.choice(FILLERS))
    return ", ".join(parts)


def main(path=None, count=600, seed=0):
    path = path or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "reviews.csv"
    )
    rng = random.Random(seed)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "label"])
        for _ in range(count):
            positive = rng.random() < 0.5
            writer.writerow([review(rng, positive), "pos" if positive else "neg"])
    return path


if __name__ == "__main__":
    print(main())
