"""Float64 NumPy references of the normalisation formulas."""

from __future__ import annotations

import math

import numpy as np


def _axes(axis, rank):
    axis = axis if isinstance(axis, (list, tuple)) else [axis]
    return [a % rank for a in axis]


def _broadcast(param, axes, rank, shape):
    # Keras's layout: the parameter's values follow the order of the input's
    # dims, whatever order `axis` lists them in (its shape may not).
    target = [1] * rank
    for a in axes:
        target[a] = shape[a]
    return param.reshape(target)


def layer_norm(x, gamma=None, beta=None, axis=-1, epsilon=1e-3):
    axes = _axes(axis, x.ndim)
    mean = x.mean(axis=tuple(axes), keepdims=True)
    var = ((x - mean) ** 2).mean(axis=tuple(axes), keepdims=True)
    y = (x - mean) / np.sqrt(var + epsilon)
    if gamma is not None:
        y = y * _broadcast(gamma, axes, x.ndim, x.shape)
    if beta is not None:
        y = y + _broadcast(beta, axes, x.ndim, x.shape)
    return y


def rms_norm(x, gamma=None, beta=None, axis=-1, epsilon=1e-6, partial=None):
    axes = _axes(axis, x.ndim)
    head = x
    if partial is not None:
        k = max(1, int(math.ceil(partial * x.shape[axes[0]])))
        head = np.take(x, np.arange(k), axis=axes[0])
    ms = (head**2).mean(axis=tuple(axes), keepdims=True)
    y = x / np.sqrt(ms + epsilon)
    if gamma is not None:
        y = y * _broadcast(gamma, axes, x.ndim, x.shape)
    if beta is not None:
        y = y + _broadcast(beta, axes, x.ndim, x.shape)
    return y


def scale_norm(x, g, axis=-1, epsilon=1e-5):
    axes = _axes(axis, x.ndim)
    norm = np.sqrt((x**2).sum(axis=tuple(axes), keepdims=True))
    return g * x / np.maximum(norm, epsilon)


def dynamic_tanh(x, alpha, gamma=None, beta=None, axis=-1):
    axes = _axes(axis, x.ndim)
    y = np.tanh(alpha * x)
    if gamma is not None:
        y = y * _broadcast(gamma, axes, x.ndim, x.shape)
    if beta is not None:
        y = y + _broadcast(beta, axes, x.ndim, x.shape)
    return y
