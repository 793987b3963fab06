"""The text files' vocabulary: a Keras `TextVectorization` layer adapted on
the training split, saved with the run and reloaded on resume so that a
token keeps its id."""

from __future__ import annotations

import json
import os

import numpy as np

from tfnorm._safe_io import atomic_write_text, refuse_links

#: Name of the vocabulary file saved with a run.
VOCABULARY_FILE = "vocabulary.json"


def make_vectorizer(max_len, max_tokens=None, vocabulary=None):
    """A `TextVectorization` layer giving `max_len` int ids per text.

    Args:
        max_len: output length; longer texts are cut, shorter ones padded
            with 0.
        max_tokens: vocabulary size limit including padding and the unknown
            token, or None for no limit.
        vocabulary: a saved vocabulary (from `get_vocabulary`) to reuse, or
            None to adapt the layer later.
    """
    from tfnorm._keras import keras

    return keras.layers.TextVectorization(
        max_tokens=max_tokens,
        output_mode="int",
        output_sequence_length=max_len,
        vocabulary=vocabulary,
    )


def get_vocabulary(vectorizer):
    """The adapted vocabulary without the padding and unknown tokens, as str."""
    return [str(token) for token in vectorizer.get_vocabulary()[2:]]


def save_vocabulary(vocabulary, directory):
    """Writes `vocabulary` (a list of tokens) to `directory/vocabulary.json`."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, VOCABULARY_FILE)
    # Through a new file and a rename: never through a link left at `path`.
    atomic_write_text(path, json.dumps(list(vocabulary), ensure_ascii=False))
    return path


def load_vocabulary(directory):
    """The vocabulary saved in `directory`, or None when there is none.

    Raises:
        ValueError: the file is not a JSON list of strings (damaged), a
            symbolic link, or cannot be read; the message names the file.
    """
    path = os.path.join(directory, VOCABULARY_FILE)
    try:
        refuse_links([path])
        if not os.path.isfile(path):
            return None
        with open(path, "rb") as handle:
            raw = handle.read(MAX_VOCABULARY_BYTES + 1)
        if len(raw) > MAX_VOCABULARY_BYTES:
            raise ValueError(
                f"it is larger than {MAX_VOCABULARY_BYTES >> 20} MiB, far more "
                "than a vocabulary a run saves"
            )
        vocabulary = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError) as error:
        raise ValueError(f"{path} cannot be read: {error}") from None
    problem = vocabulary_problem(vocabulary)
    if problem:
        raise ValueError(f"{path} cannot be read: {problem}")
    return vocabulary


#: Bytes a saved vocabulary may have: 2**20 tokens of 60 bytes fit.
MAX_VOCABULARY_BYTES = 64 << 20

# What `TextVectorization` puts before the saved tokens: a saved token of
# either name would shift every id after it, or is refused there.
_RESERVED = ("", "[UNK]")


def vocabulary_problem(vocabulary):
    """Why `vocabulary` (as read from JSON) is not a list of tokens a run
    saves, or None: tokens must be non-empty, distinct strings."""
    if not isinstance(vocabulary, list) or not all(
        isinstance(token, str) for token in vocabulary
    ):
        return "it is not a JSON list of tokens"
    if not vocabulary:
        return "it holds no tokens (a run saves at least one)"
    first = {}
    for index, token in enumerate(vocabulary):
        if token in _RESERVED:
            return f"token {index} is {token!r}, which no saved vocabulary holds"
        if token in first:
            return (
                f"token {index} {token!r} repeats token {first[token]}; each "
                "token has one id"
            )
        first[token] = index
    return None


def vectorize(vectorizer, texts, batch_size=1024):
    """Token ids `[len(texts), max_len]` (int32) for `texts`."""
    from tfnorm._keras import tf

    chunks = [
        np.asarray(vectorizer(tf.constant(texts[start : start + batch_size])))
        for start in range(0, len(texts), batch_size)
    ]
    return np.concatenate(chunks).astype(np.int32)


#: What the default standardisation of `TextVectorization`
#: ("lower_and_strip_punctuation") removes, the same in every Keras.
_STRIP_REGEX = r'[!"#$%&()\*\+,-\./:;<=>?@\[\\\]^_`{|}~\']'


def token_counts(texts, batch_size=1024):
    """The number of tokens `make_vectorizer`'s layer sees in each text.

    The layer's own standardisation and whitespace split, without the cut
    to `max_len`: what a text loses to `max_len` is what this counts.
    """
    from tfnorm._keras import tf

    counts = []
    for start in range(0, len(texts), batch_size):
        chunk = tf.strings.lower(tf.constant(texts[start : start + batch_size]))
        chunk = tf.strings.regex_replace(chunk, _STRIP_REGEX, "")
        counts.append(tf.strings.split(chunk).row_lengths().numpy())
    return np.concatenate(counts).astype(np.int64) if counts else np.zeros(0, int)
