"""A user's module whose functions misbehave as users' code does.

Each function is one way `--model-fn`/`--data-fn` code goes wrong that
Python does not report as an exception of its own: ending the process,
returning data in a form that reads another way, changing the working
directory. Tiny sizes: the tests that train run a few steps.
"""

import os
import sys

import numpy as np
import tensorflow as tf

keras = tf.keras
layers = keras.layers

FEATURES, EXAMPLES = 4, 96


def arrays(num_examples=EXAMPLES, classes=2):
    rng = np.random.RandomState(0)
    x = rng.normal(size=(num_examples, FEATURES)).astype("float32")
    return x, (x[:, 0] > 0).astype("int32") % classes


def dense_model():
    inputs = keras.Input((FEATURES,))
    model = keras.Model(inputs, layers.Dense(2)(layers.Dense(8)(inputs)))
    model.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


def two_input_model():
    first, second = keras.Input((FEATURES,)), keras.Input((FEATURES,))
    joined = layers.Concatenate()([first, second])
    model = keras.Model([first, second], layers.Dense(2)(joined))
    model.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


def array_data():
    return arrays()


# ------------------------------------------------------------ ending the process


def exit_0_model():
    sys.exit(0)


def exit_3_model():
    sys.exit(3)


def exit_text_data():
    sys.exit("no data here")


def exit_none_data():
    raise SystemExit


# ------------------------------------------------------------ single examples


def unbatched_data():
    return tf.data.Dataset.from_tensor_slices(arrays())


def unbatched_again_data():
    return tf.data.Dataset.from_tensor_slices(arrays()).batch(16).unbatch()


def unbatched_validation_data():
    x, y = arrays()
    train = tf.data.Dataset.from_tensor_slices((x, y)).batch(16)
    return train, tf.data.Dataset.from_tensor_slices((x, y))


# ------------------------------------------------------------ labels out of range


def late_bad_label_arrays():
    """Label 7 (of 2 classes) at example 70: past the first 64 examples."""
    x, y = arrays()
    y[70] = 7
    return x, y


def late_bad_label_dataset():
    """Label 7 in the 5th batch of 16: trained through 4 steps first."""
    x, y = arrays()
    y[70] = 7
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(16)


def bad_validation_label_arrays():
    x, y = arrays()
    y[90] = -1
    return (x[:80], y[:80]), (x[80:], y[80:])


# ------------------------------------------------------------ a Python generator


def generator_data():
    x, y = arrays()

    def examples():
        for start in range(0, len(x), 16):
            yield x[start : start + 16], y[start : start + 16]

    spec = (
        tf.TensorSpec((None, FEATURES), tf.float32),
        tf.TensorSpec((None,), tf.int32),
    )
    return tf.data.Dataset.from_generator(examples, output_signature=spec)


# ------------------------------------------------------------ the working directory

ELSEWHERE = os.environ.get("USER_FAULTS_ELSEWHERE")
if ELSEWHERE and os.environ.get("USER_FAULTS_CHDIR_AT_IMPORT"):
    os.chdir(ELSEWHERE)


def chdir_model():
    os.chdir(ELSEWHERE)
    return dense_model()


def chdir_data():
    os.chdir(ELSEWHERE)
    return arrays()


# ------------------------------------------------------------ features as a list


def two_inputs_data():
    x, y = arrays()
    return [x, x * 2], y


def two_inputs_tuple_data():
    x, y = arrays()
    return (x, x * 2), y


def ambiguous_pairs_data():
    """Two inputs and two outputs, or train and validation: equally long."""
    x, y = arrays()
    return (x, x), (y, y)


def two_input_train_and_validation():
    x, y = arrays()
    return ([x[:80], x[:80]], y[:80]), ([x[80:], x[80:]], y[80:])


def empty_validation_data():
    x, y = arrays()
    train = tf.data.Dataset.from_tensor_slices((x, y)).batch(16)
    return train, train.take(0)
