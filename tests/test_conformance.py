"""The NumPy conformance table: every expression runs through the real binary (one job per
table, one output per case) and is compared with NumPy evaluating the *same* expression
text on the same inputs: values (rtol 1e-10 for float64, 1e-5 for float32, exact for ints
and bools), shape and dtype (NumPy 2's promotion rules). Inputs are blocked raggedly;
the table also runs with other block shapes and must give the same answers."""
import ast
import operator
import subprocess
import warnings

import numpy as np
import pytest

from nums import BIN, job_text, run

rng = np.random.default_rng(7)
NAN = rng.normal(size=(7, 5))
NAN[rng.random(size=(7, 5)) < 0.25] = np.nan
NAN[:, 3] = np.nan  # a whole column of NaN
NAN[2, 3] = 1.0
# Slices of NaN only: nanmin/nanmax give NaN there, nanargmin/nanargmax raise.
ALLNAN = rng.normal(size=(6, 4))
ALLNAN[:, 1] = np.nan
ALLNAN[4, :] = np.nan

# NaNs that the data makes (inf - inf, 0 * inf) inside one block and across blocks: they
# are no missing values, nan-reductions give NaN there as NumPy's do.
INF = np.array([[2.0, np.nan, 0.0, np.inf], [np.inf, -np.inf, 3.0, 1.0], [0.0, 4.0, np.inf, -np.inf],
                [np.inf, 6.0, np.nan, 0.0]])

# name -> (array, ragged block shape, other block shape)
INPUTS = {
    "A": (rng.normal(size=(7, 5)), [3, 2], [7, 5]),
    "B": (rng.normal(size=(7, 5)), [4, 3], [2, 2]),
    "P": (rng.uniform(0.5, 3.0, size=(7, 5)), [2, 3], [3, 3]),
    "C": (rng.normal(size=(5, 4)), [2, 3], [5, 1]),
    "S": (rng.normal(size=(5, 5)), [2, 2], [3, 3]),
    "v": (rng.normal(size=5), [2], [5]),
    "w": (rng.normal(size=7), [3], [2]),
    "T": (rng.normal(size=(4, 3, 5)), [3, 2, 2], [1, 3, 5]),
    "X": (rng.normal(size=(6, 5, 4)), [4, 2, 3], [2, 5, 2]),
    "U": (rng.normal(size=(5, 3)), [2, 2], [5, 3]),
    "V": (rng.normal(size=(4, 3)), [3, 2], [1, 1]),
    "I": (rng.integers(-6, 7, size=(7, 5)), [3, 2], [7, 5]),
    "J": (rng.integers(1, 5, size=(7, 5)), [4, 3], [1, 5]),
    "F": (rng.normal(size=(7, 5)).astype(np.float32), [3, 2], [7, 1]),
    "M": (rng.random(size=(7, 5)) < 0.5, [3, 2], [2, 5]),
    "N": (NAN, [3, 2], [7, 5]),
    "Q": (ALLNAN, [4, 3], [2, 2]),
    "Z": (INF, [2, 2], [4, 4]),
}
# int64 past 2^53 (products and sums wrap as NumPy's do) and int divisors with zeros and
# negatives; from their own generator so the inputs above keep their values.
_big = np.random.default_rng(11)
INPUTS.update({
    "L": (_big.integers(-2**62, 2**62, size=(7, 5)), [3, 2], [7, 1]),
    "K": (_big.integers(-3, 4, size=(7, 5)), [2, 3], [7, 5]),
})


def expit(x):
    return 1 / (1 + np.exp(-x))


# NumPy's namespace for the same expression texts: the job language's names are NumPy's.
NS = {name: getattr(np, name) for name in dir(np) if not name.startswith("_")}
NS.update(sigmoid=expit, expit=expit, astype=lambda a, d: np.asarray(a).astype(d), np=np)

CASES = [
    # creation
    "zeros((3, 4)) + A[:3, :4]",
    "ones(5, dtype='int64') * 3",
    "full((2, 3), 7)",
    "full((2, 3), 2.5, dtype='float32')",
    "eye(4)",
    "eye(4, 6, k=1)",
    "eye(5, k=-2) @ S",
    "identity(5) * 2 + S",
    "arange(10)",
    "arange(2, 11, 3)",
    "arange(0.5, 3.0, 0.25)",
    "arange(10, 0, -2)",
    "linspace(0, 1, 7)",
    "linspace(-2, 3, 6, endpoint=False)",
    "zeros_like(A) + 1",
    "ones_like(I)",
    "full_like(F, 3)",
    # arithmetic and promotion
    "A + B",
    "A - 2.5",
    "2.5 - A",
    "A * B / (P + 1)",
    "A ** 2",
    "P ** B",
    "2 ** A",
    "A // 0.3",
    "A % 0.7",
    "-2.5 % (B + 3)",
    "I + J",
    "I - 3",
    "I * 2",
    "I / J",
    "I // J",
    "I % J",
    "I ** 2",
    "I + 1.5",
    "I * A",
    "F + F",
    "F * 2.0",
    "F + A",
    "F + I",
    "F / 3",
    "M + M",
    "M * M",
    "M + 1",
    "M * A",
    "M + I",
    "-I",
    "-A",
    "abs(I)",
    "square(I)",
    "sign(I)",
    # comparisons and logic
    "A > B",
    "A <= 0.1",
    "I == J",
    "I != 0",
    "F < A",
    "(A > 0) & (B < 0)",
    "(A > 0) | M",
    "M ^ (B > 0)",
    "~M",
    "logical_and(A > 0, M)",
    "logical_or(I, M)",
    "logical_xor(A > 0, B > 0)",
    "logical_not(M)",
    "greater(A, B) & less_equal(I, 2)",
    "equal(I, J) | not_equal(A, A)",
    # unary functions
    "exp(A) + expm1(B)",
    "log(P) + log1p(P)",
    "sqrt(P)",
    "abs(A) + absolute(B)",
    "sign(A)",
    "sin(A) * cos(B) - tan(A / 4) + tanh(B)",
    "sigmoid(A) + expit(B)",
    "floor(A) + ceil(B)",
    "exp(I)",
    "sqrt(F * F)",
    "maximum(A, B)",
    "minimum(A, 0)",
    "maximum(I, J)",
    "where(A > 0, A, B)",
    "where(M, I, 0)",
    "where(A > B, 1, -1)",
    "where(M, F, 2)",
    "clip(A, -0.5, 0.5)",
    "clip(A, min=-0.5, max=0.5)",
    "clip(I, max=2)",
    "clip(I, 0, None)",
    "isnan(N)",
    "isfinite(N / A)",
    "isinf(1 / (I - I))",
    "power(P, B) + subtract(A, multiply(B, 2)) + add(A, divide(B, 2))",
    "floor_divide(A, B + 3) + remainder(A, 2) + mod(B, 3) + true_divide(A, 3)",
    # broadcasting, also between different block grids
    "A + v",
    "A * w[:, None]",
    "w[:, None] - v",
    "v[None, :] / (P + 10)",
    "T * v",
    "T + A[:4, :, None][:, :3, :] * 0 + v",
    "(A > 0) & (v > 0)",
    # reductions
    "sum(A)",
    "sum(A, axis=0)",
    "sum(A, axis=-1)",
    "sum(T, axis=(0, 2))",
    "sum(T, axis=1, keepdims=True)",
    "A.sum(0)",
    "sum(I, axis=1)",
    "sum(M, axis=0)",
    "sum(F, axis=0)",
    "mean(A)",
    "mean(A, axis=0)",
    "mean(I, axis=1)",
    "mean(T, axis=(1, 2), keepdims=True)",
    "std(A)",
    "std(A, axis=0)",
    "var(A, axis=1, ddof=1)",
    "var(T, axis=(0, 2))",
    "min(A)",
    "max(A, axis=0)",
    "min(I, axis=1)",
    "amax(T, axis=2)",
    "amin(F, axis=0)",
    "prod(P, axis=0)",
    "prod(J)",
    "argmin(A)",
    "argmax(A, axis=0)",
    "argmax(A, axis=1)",
    "argmin(T, axis=1)",
    "argmax(I, axis=0)",
    "argmax(A, axis=1, keepdims=True)",
    "argmin(T, keepdims=True)",
    "max(A, axis=(0, 1), keepdims=True)",
    "nanmean(N, axis=0, keepdims=True)",
    "prod(M, axis=1)",
    "min(M)",
    "all(A > -3)",
    "all(M, axis=0)",
    "any(M, axis=1)",
    "any(A > 2, axis=(0, 1))",
    "nansum(N)",
    "nansum(N, axis=0)",
    "nanmean(N, axis=1)",
    "nanmax(N, axis=1)",
    "nanmin(N)",
    "nanprod(N, axis=1)",
    "nanstd(N, axis=1)",
    "nanvar(N)",
    "nanargmax(N, axis=1)",
    "nanargmin(N, axis=1)",
    "nanmin(Q, axis=0)",
    "nanmax(Q, axis=1)",
    "nanmax(Q[4])",
    "nanmean(Q, axis=0)",
    "nanvar(Q, axis=0)",
    "nanstd(Q)",
    "nansum(Z)",
    "nansum(Z, axis=0)",
    "nansum(Z, axis=1)",
    "nansum(Z, axis=())",
    "nanprod(Z)",
    "nanprod(Z, axis=0)",
    "nanprod(Z, axis=1, keepdims=True)",
    "nanmean(Z)",
    "nanmean(Z, axis=1)",
    "nanvar(Z)",
    "nanvar(Z, axis=0)",
    "nanstd(Z, axis=1)",
    "nanmax(Z, axis=1)",
    "nanmin(Z)",
    "nanargmax(Z, axis=0)",
    "nanargmin(Z, axis=1)",
    "sum(Z, axis=1)",
    "prod(Z, axis=0)",
    "var(v, ddof=7)",
    "std(A, axis=1, ddof=6)",
    "nanvar(v, ddof=6)",
    "trace(M[:5, :5])",
    "A[[True, False, True, False, True, False, True]]",
    "I * 0 + -9223372036854775808",
    "max(N, axis=0)",
    "argmax(N, axis=0)",
    "sum(N, axis=1)",
    # linear and tensor algebra
    "A @ C",
    "A @ v",
    "w @ A",
    "v @ v",
    "A.T @ A",
    # stacks: their batch axes broadcast (a missing axis, axes of length 1)
    "T @ C",
    "A @ X",
    "T[:, None] @ X[None, :, :, :3]",
    "matmul(T[:1], X[:, :, :2])",
    "I[None] @ J.T[None, None]",
    "matmul(A, C)",
    "dot(A, C)",
    "dot(v, v)",
    "dot(T, C)",
    "outer(w, v)",
    "inner(A, B)",
    "inner(v, v)",
    "tensordot(T, C, axes=1)",
    "tensordot(X, T, axes=([2, 1], [0, 2]))",
    "tensordot(A, B, axes=2)",
    "einsum('ij,jk->ik', A, C)",
    "einsum('ijk,jf,kf->if', X, U, V)",
    "einsum('ij,ij->i', A, B)",
    "einsum('ii->i', S)",
    "einsum('ij->ji', A)",
    "einsum('ij,kj', A, B)",
    "einsum('ijk->', T)",
    # NumPy's einsum broadcasts a length-1 axis against its letter's size elsewhere
    "einsum('ij,ij->', w[:, None], A)",
    "einsum('ij,ij->ij', A[:1], B)",
    # `...`: the axes the letters leave, broadcast right-aligned (xarray's dot)
    "einsum('...j,...j->...', T, U.T)",
    "einsum('...ij,...j->...i', X, A[:6, :4])",
    "einsum('i...', T)",
    "einsum('...,...', T, v)",
    "einsum('ji...->...', X)",
    # A matrix product of a matrix scaled along the contracted axis (a fit's Hessian) and
    # a sum of a product are read as einsums without the product block: same values
    "A.T @ (B * w[:, None])",
    "(B * w[:, None]).T @ A",
    "A.T @ (w[:, None] * A)",
    "einsum('ji,jk,j->ik', A, B, w)",
    "Z.T @ (Z * Z[:, 1][:, None])",
    "sum(A * B, axis=0)",
    "sum(A * B, axis=1)",
    "sum(A * B, axis=(0, 1))",
    "mean(A * B, axis=0)",
    "sum(Z * Z, axis=0)",
    "sum(Z * Z, axis=1)",
    "sum(T * T, axis=(1, 2))",
    "sum(T * T, axis=1)",
    "sum(A * B, axis=0, keepdims=True)",
    "einsum('ij,jk->ik', A[:, :1], C)",
    "einsum('ij,ij', A[:1, :1], B)",
    "einsum('ijk,jf,kf->if', X[:, :1], U, V[:1])",
    "einsum('ii,i->i', S, v[:1])",
    "trace(S)",
    "trace(A @ A.T)",
    "trace(X[:4], axis1=0, axis2=2)",
    "trace(A)",
    "trace(A.T)",
    "trace(A, 2)",
    "trace(A, -3)",
    "trace(A, 9)",
    "trace(I, offset=1, axis1=1, axis2=0)",
    "trace(X, -1, 2, 0)",
    # shapes
    "A.T",
    "transpose(T)",
    "transpose(T, (1, 0, 2))",
    "T.transpose(2, 0, 1)",
    "swapaxes(T, 0, 2)",
    "reshape(A, (5, 7))",
    "A.reshape(35)",
    "reshape(T, (6, -1))",
    "reshape(T, (2, 2, 15)) * 2",
    "reshape(T, (5, 12), order='F')",
    "reshape(A.T, (7, 5), 'F')",
    "A.reshape(5, 7, order='A')",
    "ravel(A)",
    "expand_dims(v, 0)",
    "expand_dims(A, (0, 3))",
    "squeeze(A[:, 1:2])",
    "squeeze(T[1:2, :, 2:3], axis=0)",
    "concatenate((A, B))",
    "concatenate((A, B, P), axis=1)",
    "concatenate((I, A), axis=0)",
    "stack((A, B))",
    "stack((v, v, v), axis=1)",
    "vstack((A, B))",
    "hstack((v, v))",
    "astype(A, 'float32')",
    "A.astype('int64')",
    "I.astype('bool')",
    # indexing
    "A[2]",
    "A[-1]",
    "A[1:5]",
    "A[::2]",
    "A[::-1]",
    "A[5:1:-2, ::-3]",
    "A[:, 1]",
    "A[-3:, 1:-1]",
    "T[1, :, ::2]",
    "T[::-1, 1:, -1]",
    "T[:, :, 0]",
    "T[..., 0]",
    "T[1, ...] + 1",
    "T[..., None, ::2]",
    "A[..., 1:3]",
    "A[2, 3]",
    "w[1:6][::-1]",
    "v[:, None] * v[None, :]",
    "A[1:6:2, None, :]",
    "A.shape[0] * v",
    "A[[0, 2, 6]]",
    "A[:, [4, 0, 0, 3]]",
    "T[:, [2, 0], 1:]",
    "w[[-1, 0]] * 2",
    # boolean masks: a shape known only once the mask is computed
    "A[A[:, 0] > 0]",
    "A[:, v > -1]",
    "w[w > 0]",
    "sum(A[w > 0], axis=0)",
    "I[M[:, 0]] * 2",
    "T[:, :, v < -0.5][1:, ::-1]",
    "A / A.size",
    # int64 computed in int64, NumPy's bits (wrapping on overflow) past 2^53
    "arange(3000000000, 3000000010)",
    "arange(3000000000, 3000000010) * arange(3000000000, 3000000010) + 1",
    "arange(3000000000, 3000000010) ** 2 + 1",
    "arange(-3000000000, 3000000000, 1000000007) * 3000000019",
    "full((2, 3), 3000000000) * 3000000000 + 7",
    "linspace(0, 10, 4, dtype='int64')",
    "linspace(-10, 0, 4, dtype='int64')",
    "L + L",
    "L - I",
    "L * L + 1",
    "L * 3000000019 - 7",
    "-L",
    "abs(L)",
    "sign(L)",
    "square(L)",
    "L // J",
    "L % J",
    "L // K",
    "L % K",
    "I // K",
    "I % K",
    "-7 // K + 7 % K",
    "L ** 3",
    "L ** J",
    "K ** 2",
    "maximum(L, I)",
    "minimum(L, K)",
    "maximum(L, 0.5)",
    "L == L + 1 - 1",
    "L > I",
    "L + 1 > L",
    "L < 4611686018427387904.0",
    "where(M, L, I)",
    "where(L > 0, L, -1)",
    "clip(L, -1000, 1000)",
    "clip(L, I, J)",
    "sum(L)",
    "sum(L, axis=0)",
    "sum(L * L, axis=1)",
    "prod(L)",
    "prod(L, axis=0)",
    "nansum(L, axis=1)",
    "min(L, axis=1)",
    "max(L)",
    "argmax(L, axis=0)",
    "argmin(L)",
    "mean(L)",
    "mean(L, axis=0)",
    "std(L, axis=1)",
    "L @ L.T",
    "L.T @ K",
    "I @ J.T",
    "dot(L, I[0])",
    "einsum('ij,ij->i', L, L)",
    "outer(L[0], L[1])",
    "tensordot(L, K, axes=2)",
    "trace(L[:5])",
    "concatenate((L, I))",
    "L.astype('float64')",
    "L.astype('float32')",
    "(L / 7).astype('int64')",
    "(A * 1e6).astype('int64')",
    # int literals past 2^53 stay exact (literals, folded Python ints, creation)
    "L + 9007199254740993",
    "L * 0 + 2 ** 62 + 1",
    "-9223372036854775807 - 1 + I * 0",
    "abs(-9223372036854775807 - 1 + I * 0)",
    "I * 3000000000 * 3000000000",
    "maximum(L, 9007199254740993)",
    "where(M, L, 4611686018427387905)",
    "clip(L, -2 ** 62 + 1, 2 ** 62 - 1)",
    "full((2, 3), 9007199254740993)",
    "full_like(I, -9007199254740993)",
    "arange(9007199254740993, 9007199254741003)",
    "arange(9007199254740993, 9007199254741013, 3) * 3 + 1",
    "arange(0.5, 3, 0.5, dtype='int64')",
    "arange(0.1, 1, 0.3)",
    "arange(10, dtype='float32') / 3",
    "2.0 ** -1 + A",
    "7 // -2 + I",
    # every special float scalar crosses the wire (NaN, infinities, -0.0: its sign shows
    # as the sign of 1 / x)
    "maximum(A, -np.inf) + np.nan",
    "A * -0.0",
    "1 / (A * -0.0)",
    "1 / (-0.0 - zeros((2, 2)))",
    "where(A > 0, np.inf, -np.inf)",
    "minimum(A, np.inf) - np.inf",
    "full((2, 3), np.nan)",
    "1 / full((2, 2), -0.0)",
    "full((2, 3), -np.inf, dtype='float32')",
    "np.nan * I",
    "I + np.inf",
    "A > np.nan",
    "maximum(I, np.nan)",
    "clip(A, -np.inf, 0)",
    "isnan(A + np.nan)",
    # linear algebra (signs of Q, R, U and Vh are LAPACK's choice: compared through abs)
    "abs(np.linalg.qr(A).R)",
    "abs(linalg.qr(A, mode='r'))",
    "np.linalg.qr(A)[0] @ np.linalg.qr(A)[1]",
    "np.linalg.lstsq(A, w)[0]",
    "np.linalg.lstsq(A, B[:, :2])[0]",
    "np.linalg.lstsq(F, w)[0]",
    "np.linalg.svdvals(A)",
    "np.linalg.svdvals(C.T)",
    "np.linalg.svd(A, full_matrices=False).S",
    "abs(np.linalg.svd(U, full_matrices=False).Vh)",
    "np.linalg.norm(A)",
    "np.linalg.norm(A, 2)",
    "np.linalg.norm(A, 1)",
    "np.linalg.norm(A, -np.inf)",
    "np.linalg.norm(A, 'fro')",
    "np.linalg.norm(A, axis=1)",
    "np.linalg.norm(v, np.inf)",
    "np.linalg.norm(F)",
    "np.linalg.norm(T)",
    "np.linalg.norm(A, axis=0, keepdims=True)",
    "np.linalg.norm(A, np.inf, axis=(1, 0))",
    "np.linalg.norm(A, 1, axis=(1, 0))",
    "np.linalg.norm(A, -1, axis=(0, 1))",
    "np.linalg.norm(T, 1, axis=(2, 0))",
    "np.linalg.norm(T, np.inf, axis=(0, 2))",
    "np.linalg.norm(A, 2, axis=(1, 0))",
    "np.linalg.inv(S)",
    "np.linalg.solve(S, v)",
    "np.linalg.det(S)",
    "np.linalg.slogdet(S).logabsdet",
    "np.linalg.cholesky(S @ S.T + 5 * eye(5))",
    # stacks of systems: the batch axes broadcast, b a vector only when 1-D
    "np.linalg.solve(X[:, 1:, :] + 5 * eye(4), w[:4])",
    "np.linalg.solve(X[:2, 1:, :][:, None] + 5 * eye(4), X[:3, 1:, :2])",
    "np.linalg.solve(S + 5 * eye(5), swapaxes(T, 1, 2)[:, :, :2])",
    # cumulative: a scan across blocks (block totals, their offsets, each block from its own)
    "cumsum(A)",
    "cumsum(A, axis=0)",
    "cumsum(T, axis=1)",
    "cumprod(P, axis=1)",
    "cumprod(J, axis=0)",
    "cumsum(I, axis=0)",
    "cumsum(M, axis=1)",
    "cumsum(F, axis=0)",
    "cumsum(L, axis=0)",
    "cumprod(L, axis=1)",
    "nancumsum(N, axis=0)",
    "nancumprod(N, axis=1)",
    "cumsum(A, axis=1, dtype='float32')",
    "cumsum(Z, axis=0)",
    "nancumsum(Z, axis=1)",
    "cumulative_sum(w, include_initial=True)",
    "cumulative_sum(A, axis=0)",
    "cumulative_prod(P, axis=1, include_initial=True)",
    "diff(A)",
    # gradient with a spacing, or coordinates (uneven: NumPy's weights)
    "gradient(A, 0.5, axis=1)",
    "gradient(A, cumsum(P[:, 0]), axis=0)",
    "gradient(F, cumsum(P[0]), axis=1)",
    "gradient(I, cumsum(P[:, 1]), axis=0)",
    "gradient(T, cumsum(P[:3, 2]), axis=1)",
    "diff(A, n=2, axis=0)",
    "diff(M, axis=0)",
    "diff(I, prepend=0)",
    "diff(w, append=w[:2])",
    "diff(T, axis=1)",
    "diff(A, n=0)",
    # sorting and searching (stable; NumPy's order: NaN last) and selections whose size the
    # values decide (counted per block in a stage of their own first)
    "sort(A)",
    "sort(A, axis=0)",
    "sort(N, axis=0)",
    "sort(T, axis=1)",
    "sort(A, axis=None)",
    "sort(I, kind='stable')",
    "sort(M, axis=0)",
    "sort(F, axis=None)",
    "sort(Z, axis=None)",
    "argsort(A, axis=0)",
    "argsort(I, axis=None, kind='stable')",
    "argsort(N, axis=1, kind='stable')",
    "argsort(M, axis=0, kind='stable')",
    "argsort(T, axis=0, stable=True)",
    "searchsorted(sort(w), v)",
    "searchsorted(sort(w), A, side='right')",
    "searchsorted(sort(ravel(I)), 0)",
    "searchsorted(sort(ravel(N)), N)",
    "searchsorted(sort(ravel(I)), J, side='right')",
    "searchsorted(w, v, sorter=argsort(w))",
    "searchsorted(w, A, side='right', sorter=argsort(w))",
    "nonzero(I)[0]",
    "nonzero(I)[1]",
    "nonzero(T > 0)[2]",
    "nonzero(w > 0)[0]",
    "flatnonzero(M)",
    "argwhere(I > 2)",
    "argwhere(w > 0)",
    "count_nonzero(I)",
    "count_nonzero(I, axis=0)",
    "count_nonzero(A > 0, axis=1, keepdims=True)",
    "where(M)[1]",
    "where(I < 0)[0] + 1",
    # sets (np.unique_values is unordered in NumPy: compared sorted)
    "unique(I)",
    "unique(N)",
    "unique(M)",
    "unique(J, return_counts=True)[1]",
    "unique(I, return_index=True)[1]",
    "unique(I, return_inverse=True)[1]",
    "unique(N, return_inverse=True)[1]",
    "unique(N, return_index=True, return_counts=True)[2]",
    "unique(N, equal_nan=False)",
    "sort(unique_values(J))",
    "unique_counts(I).counts",
    "unique_inverse(J).inverse_indices",
    "unique_all(N).indices",
    "unique_all(N).inverse_indices",
    "unique_all(I).counts",
    "unique_all(T > 0).values",
    "isin(I, J)",
    "isin(N, N[0])",
    "isin(A, A[:2])",
    "isin(I, J, invert=True)",
    "isin(I, 3)",
    "isin(Z, Z[:, 0])",
    # statistics: exact order statistics from the sorted lanes (every NumPy method), ptp,
    # weighted averages, cov/corrcoef, histogram and bincount (a sum over blocks)
    "median(A)",
    "median(A, axis=0)",
    "median(I, axis=1)",
    "median(N, axis=0)",
    "median(T, axis=2, keepdims=True)",
    "median(F)",
    "nanmedian(N, axis=0)",
    "nanmedian(N)",
    "nanmedian(Q, axis=1)",
    "percentile(A, 30)",
    "percentile(A, (10, 50, 90), axis=0)",
    "percentile(I, 25, axis=1, method='lower')",
    "percentile(J, 50, method='nearest')",
    "quantile(A, 0.3, axis=1)",
    "quantile(w, (0.1, 0.5, 1.0))",
    "quantile(A, 0.4, method='inverted_cdf')",
    "quantile(A, 0.4, method='averaged_inverted_cdf')",
    "quantile(A, 0.4, method='closest_observation')",
    "quantile(A, 0.4, method='interpolated_inverted_cdf')",
    "quantile(A, 0.4, method='hazen')",
    "quantile(A, 0.4, method='weibull')",
    "quantile(A, 0.4, method='median_unbiased')",
    "quantile(A, 0.4, method='normal_unbiased')",
    "quantile(A, 0.4, method='higher')",
    "quantile(A, 0.5, method='midpoint', axis=0)",
    "quantile(I, 1)",
    "quantile(F, 0.25, axis=0)",
    "quantile(N, 0.5, axis=1)",
    "nanquantile(N, (0.2, 0.7), axis=0)",
    "nanpercentile(N, 50, axis=1, keepdims=True)",
    "nanquantile(Q, 0.5, axis=0)",
    "ptp(A)",
    "ptp(I, axis=0)",
    "ptp(T, axis=(0, 2), keepdims=True)",
    "average(A)",
    "average(A, axis=0, weights=P[:, 0])",
    "average(A, weights=P)",
    "average(I, axis=1, weights=J, returned=True)[1]",
    "average(A, axis=1, returned=True)[1]",
    "cov(A)",
    "cov(A, rowvar=False)",
    "cov(w)",
    "cov(A[0], B[0])",
    "cov(A, bias=True)",
    "cov(A, ddof=2)",
    "cov(I)",
    "corrcoef(A)",
    "corrcoef(A, rowvar=False)",
    "corrcoef(w, w * 2 + 1)",
    "histogram(A)[0]",
    "histogram(A)[1]",
    "histogram(A, bins=4, range=(-1, 1))[0]",
    "histogram(A, bins=3, weights=P)[0]",
    "histogram(I, bins=5, density=True)[0]",
    "histogram(I, bins=5)[1]",
    "bincount(ravel(J))",
    "bincount(ravel(J), minlength=9)",
    "bincount(ravel(J), weights=ravel(A))",
    # elementwise (rounding halves to even, bitwise and shifts of ints) and manipulation
    # (flip, roll and tile as slices and joins of blocks), list operands, empty arrays
    "round(A * 10)",
    "round(A * 100, -1)",
    "round(F, 1)",
    "around(I)",
    "rint(A * 3)",
    "trunc(A * 3)",
    "trunc(I)",
    "log10(P)",
    "log2(F)",
    "signbit(A)",
    "signbit(I)",
    "positive(I)",
    "sinh(A)",
    "cosh(A)",
    "arcsin(A / 3)",
    "arccos(A / 3)",
    "arctan(A)",
    "arcsinh(A)",
    "arccosh(P + 1)",
    "arctanh(A / 3)",
    "asin(F / 3)",
    "arctan2(I, J)",
    "hypot(A, B)",
    "copysign(A, B)",
    "copysign(I, -1)",
    "logaddexp(A, B)",
    "nextafter(A, B)",
    "nextafter(F, 0)",
    "I | 6",
    "I ^ J",
    "I << 2",
    "J >> 1",
    "I >> J",
    "K << J",
    "bitwise_and(I, J)",
    "bitwise_or(M, M)",
    "bitwise_xor(I, 3)",
    "bitwise_invert(I)",
    "invert(M)",
    "left_shift(J, J)",
    "right_shift(I, 1)",
    "bitwise_left_shift(K, 3)",
    "5 & I",
    "(I > 0) | M",
    "flip(A)",
    "flip(T, axis=(0, 2))",
    "flip(w)",
    "roll(A, -3, axis=1)",
    "roll(T, (1, 2), axis=(0, 2))",
    "roll(w, 10)",
    "tile(v, 3)",
    "tile(v, (2, 2))",
    "tile(T, 2)",
    "repeat(A, 3, axis=0)",
    "repeat(w, [1, 0, 2, 1, 3, 0, 1])",
    "repeat(I, 2, axis=1)",
    "moveaxis(T, 0, -1)",
    "moveaxis(X, (0, 1), (2, 0))",
    "permute_dims(T, (2, 0, 1))",
    "take(A, [0, 3, 3], axis=1)",
    "take(A, 4)",
    # array indices and counts: their values computed first
    "take(A, argsort(w)[:3], axis=0)",
    "take(A, J - 1, axis=1)",
    "take(A, J)",
    "repeat(w, J[:, 0])",
    "repeat(A, J[0], axis=1)",
    "take(w, [-1, 0])",
    "broadcast_to(w[:, None], (7, 4))",
    "broadcast_to(I[0], (2, 7, 5))",
    "broadcast_arrays(A, v)[1]",
    "broadcast_arrays(w[:, None], v)[0]",
    "meshgrid(v, w)[1]",
    "meshgrid(v, w, indexing='ij')[1]",
    "meshgrid(v, w, sparse=True)[0]",
    "meshgrid(v, w, T[0, 0])[2]",
    "triu(A, 1)",
    "tril(A, -2)",
    "triu(T)",
    "tril(M)",
    "diagonal(A)",
    "diagonal(A, -2)",
    "diagonal(T, 0, 0, 2)",
    "diagonal(A, 9)",
    "pad(v, (2, 3), constant_values=7)",
    "pad(A, ((1, 0), (0, 2)))",
    "pad(I, 2)",
    "pad(M, 1)",
    "concat((A, B))",
    "concat((A, B), axis=1)",
    "unstack(T)[1]",
    "unstack(A, axis=1)[4]",
    "expand_dims(T, (-1, 1))",
    "A[:, None] * v",
    "A * [1, 2, 3, 4, 5]",
    "I + [[1], [2], [3], [4], [5], [6], [7]]",
    "M & [True, False, True, True, False]",
    "F * [1.5, 2, 3, 4, 5]",
    "I * [1, 2, 3, 4, 5]",
    "zeros((0, 3)) + 1",
    "A[:0] * 2",
    "sum(A[:0])",
    "flip(A[:0])",
    "concat((A[:0], A))",
    "round(A, 2)",
    "round(I, -1)",
    "log2(P)",
    "atan2(A, B)",
    "I & J",
    "~I",
    "flip(A, axis=0)",
    "roll(A, 2)",
    "tile(A, (2, 1))",
    "repeat(A, 2)",
    "tril(A)",
    "diagonal(A, 1)",
    "pad(A, 1)",
    "meshgrid(v, w)[0]",
    "broadcast_to(v, (3, 5))",
    # (issue 40: what Python decided before it forwarded these to the engine)
    "roll(w, (1, 2))",
    "argwhere(I[0, 0] > 2)",
    "argwhere(I[0, 0] > 100)",
    "roll(T, 1, axis=(0, 1))",
    "sum(I, axis=0, dtype='int8')",
    "prod(I + 5, axis=1, dtype='uint8')",
    "mean(F, dtype='float64')",
    "sum(A, axis=1, dtype='float32')",
    "std(A, axis=0, correction=1)",
    "nanvar(A, correction=2)",
]

# A subset that also runs against Garage (the same code path, a real S3 server).
GARAGE_SUBSET = [c for i, c in enumerate(CASES) if i % 5 == 0]


class Number:
    """A number of the job language (a literal, `np.nan` and the like, or operators of
    numbers alone): between numbers the operators are Python's (ints exact, `True + True`
    is 2, `1.0 / 0` raises), as in NumPy code, where Python computes them before NumPy
    sees the result; an int past uint64 raises OverflowError, as nums-cloud refuses it.
    Beside an array or as a function's argument it is a Python number (weak: `F32 * 2.0`
    stays float32)."""
    __array_ufunc__ = None  # NumPy's operators defer to ours

    def __init__(self, v):
        # An int past uint64 raises OverflowError: nums-cloud has no larger int.
        def integer(i):
            return np.int64(i) if -2**63 <= i < 2**63 else np.uint64(i)
        self.v = v if isinstance(v, np.generic) else (
            np.bool_(v) if isinstance(v, bool) else integer(v) if isinstance(v, int)
            else np.complex128(v) if isinstance(v, complex) else np.float64(v))

    def py(self):
        return self.v.item()

    def __neg__(self):
        return Number(-self.py())

    def __pos__(self):
        return Number(+self.py())

    def __invert__(self):
        v = self.py()
        if isinstance(v, (float, bool)):
            # (~ of a bool is deprecated by Python, and nums-cloud refuses it.)
            raise TypeError(f"bad operand type for unary ~: {type(v).__name__!r}")
        return Number(~v)


def _number_op(f):
    def op(a, b):
        return Number(f(a.py(), b.py())) if isinstance(b, Number) else f(a.py(), b)

    def rop(a, b):
        return f(b, a.py())
    return op, rop


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor", "lshift", "rshift", "lt", "le", "gt",
              "ge", "eq", "ne"):
    _op, _rop = _number_op(getattr(operator, f"{_name}_" if _name in ("and", "or") else _name))
    setattr(Number, f"__{_name}__", _op)
    if _name not in ("lt", "le", "gt", "ge", "eq", "ne"):
        setattr(Number, f"__r{_name}__", _rop)


def _python(v):
    if isinstance(v, (tuple, list)):
        return type(v)(_python(x) for x in v)
    return v.py() if isinstance(v, Number) else v


class _Numbers(ast.NodeTransformer):
    """Makes the numbers of an expression `Number`s (not inside an index, where they are
    Python's ints) and passes them to functions as Python numbers."""
    CONSTANTS = {"nan", "inf", "pi", "e"}

    def wrap(self, node):
        return ast.Call(ast.Name("_Number", ast.Load()), [node], [])

    def visit_Constant(self, node):
        ok = isinstance(node.value, (bool, int, float))
        return self.wrap(node) if ok else node

    def visit_UnaryOp(self, node):
        # -9223372036854775808 is one literal (int64's minimum).
        if isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) and \
                type(node.operand.value) in (int, float):
            return self.wrap(ast.Constant(-node.operand.value))
        return self.generic_visit(node)

    def visit_Name(self, node):
        return self.wrap(node) if node.id in self.CONSTANTS else node

    def visit_Attribute(self, node):
        if isinstance(node.value, ast.Name) and node.value.id == "np" and node.attr in self.CONSTANTS:
            return self.wrap(node)
        return self.generic_visit(node)

    def visit_List(self, node):
        # A list operand is NumPy's array of Python numbers (`A * [1, 2, 3]`).
        node = self.generic_visit(node)
        return ast.Call(ast.Name("_python", ast.Load()), [node], [])

    def visit_Subscript(self, node):
        node.value = self.visit(node.value)
        return node

    def visit_Call(self, node):
        node = self.generic_visit(node)
        unwrap = lambda a: ast.Call(ast.Name("_python", ast.Load()), [a], [])  # noqa: E731
        node.args = [unwrap(a) for a in node.args]
        for k in node.keywords:
            k.value = unwrap(k.value)
        return node


def numpy_eval(expr, ns):
    """NumPy's value of the job language's `expr` in the namespace `ns` (NumPy's names and
    the inputs): Python's eval of the text, its numbers as `Number`s."""
    tree = ast.fix_missing_locations(_Numbers().visit(ast.parse(expr, mode="eval")))
    v = eval(compile(tree, "<expr>", "eval"), {**ns, "_Number": Number, "_python": _python})  # noqa: S307
    return np.asarray(v.v if isinstance(v, Number) else v)


def numpy_answer(expr, inputs=None):
    """NumPy's value of `expr` on INPUTS (or on `inputs`, name -> array)."""
    ns = dict(NS)
    ns.update(inputs if inputs is not None else {k: v[0] for k, v in INPUTS.items()})
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's "All-NaN slice" and the like
        return numpy_eval(expr, ns)


def assert_matches(expr, got, want):
    assert got.shape == want.shape, f"{expr}: shape {got.shape}, NumPy {want.shape}"
    assert got.dtype == want.dtype, f"{expr}: dtype {got.dtype}, NumPy {want.dtype}"
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=expr)
    else:
        rtol = 1e-5 if want.dtype == np.float32 else 1e-10
        # The scale of the finite values (an infinity would make any finite value "close").
        scale = float(np.max(np.abs(want[np.isfinite(want)]))) if np.isfinite(want).any() else 1.0
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * 1e-2 * max(scale, 1.0),
                                   equal_nan=True, err_msg=expr)


def run_table(tmp_path, cases, storage, env=None, blocks=1, scheduler="lshs"):
    """All cases in one job; returns {case: result}."""
    d = tmp_path / "in"
    d.mkdir(exist_ok=True)
    arrays = {}
    for name, (arr, ragged, other) in INPUTS.items():
        np.save(d / f"{name}.npy", arr)
        arrays[name] = {"load": str(d / f"{name}.npy"), "block": ragged if blocks == 1 else other}
    return run_cases(tmp_path, arrays, cases, storage, env=env,
                     compute={"scheduler": scheduler, "memory_mb": 1024})


def run_cases(tmp_path, arrays, cases, storage, env=None, compute=None):
    """`cases` as one job beside `arrays` (the job's array table); returns {case: result}."""
    arrays = dict(arrays)
    outputs = {}
    for i, expr in enumerate(cases):
        arrays[f"c{i}"] = expr
        outputs[f"c{i}"] = str(tmp_path / f"c{i}.npy")
    job = tmp_path / "job.toml"
    job.write_text(job_text(arrays, outputs, name="conformance", storage=storage, compute=compute or {}))
    run(job, env=env)
    return {expr: np.load(tmp_path / f"c{i}.npy") for i, expr in enumerate(cases)}


def test_negative_int_powers_are_refused_as_numpy_refuses_them(tmp_path):
    """A literal negative exponent of an int array is refused at check; an array of
    exponents that turns out negative fails the run with NumPy's message."""
    d = tmp_path / "in"
    d.mkdir()
    np.save(d / "I.npy", INPUTS["I"][0])
    storage = {"url": f"file://{tmp_path / 'store'}"}
    job = tmp_path / "job.toml"
    job.write_text(job_text({"I": {"load": str(d / "I.npy")}, "y": "I ** -1"}, {"y": str(tmp_path / "y.npy")},
                            storage=storage))
    p = subprocess.run([BIN, "check", str(job)], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "Integers to negative integer powers are not allowed" in p.stderr, p.stderr
    assert "arrays.y" in p.stderr, p.stderr
    job.write_text(job_text({"I": {"load": str(d / "I.npy")}, "y": "2 ** (I - 7)"}, {"y": str(tmp_path / "y.npy")},
                            storage=storage))
    p = run(job, check=False)
    assert p.returncode != 0 and "Integers to negative integer powers are not allowed" in p.stderr, p.stderr
    assert not (tmp_path / "y.npy").exists()


def test_nanargmin_of_a_slice_of_nans_only_fails_as_numpy_raises(tmp_path):
    """NumPy raises for nanargmin/nanargmax over a slice of NaNs only; the run fails saying
    so (the index it would otherwise give is the axis' length) and writes nothing."""
    d = tmp_path / "in"
    d.mkdir()
    np.save(d / "Q.npy", ALLNAN)
    for expr in ("nanargmin(Q, axis=0)", "nanargmax(Q[4])"):
        with pytest.raises(ValueError, match="All-NaN slice encountered"):
            numpy_answer(expr)
        out = tmp_path / "y.npy"
        job = tmp_path / "job.toml"
        job.write_text(job_text({"Q": {"load": str(d / "Q.npy"), "block": [4, 3]}, "y": expr}, {"y": str(out)},
                                storage={"url": f"file://{tmp_path / 'store'}"}))
        p = run(job, check=False)
        f = expr.split("(")[0]
        assert p.returncode != 0 and f"{f}: All-NaN slice encountered" in p.stderr, p.stderr
        assert not out.exists()
    # A slice with one number is answered.
    job.write_text(job_text({"Q": {"load": str(d / "Q.npy"), "block": [4, 3]}, "y": "nanargmin(Q[:4], axis=1)"},
                            {"y": str(out)}, storage={"url": f"file://{tmp_path / 'store'}"}))
    run(job)
    np.testing.assert_array_equal(np.load(out), np.nanargmin(ALLNAN[:4], axis=1))


def test_edge_values_match_numpy_bit_for_bit(tmp_path):
    """Values where a near answer is a wrong one: float32 with Python numbers (NumPy 2 makes
    the number a float32 first), floor division and remainder with infinities and signed
    zeros (npy_divmod), nanvar with infinities (inf - inf is not a missing value), signed
    zeros in maximum, minimum, clip, outer and the extremes, and einsums whose sum over a
    letter of one operand meets 0 * inf (NaN in NumPy's sum of products)."""
    d = tmp_path / "in"
    d.mkdir()
    f32 = np.concatenate([np.float32([0.1, 0.2, 0.7, 1000]), rng.normal(size=60).astype(np.float32)])
    k = np.array([np.inf, -np.inf, -0.5, 0.5, 2.5, -1.0, -0.0, 3.0])
    x = np.array([[1.0, np.inf, 2.0], [np.inf, -np.inf, 1.0]])
    # Signed zeros: NumPy's maximum/minimum give the second operand on a tie, fmax/fmin
    # (nanmax, nanmin) the first; clip with number bounds keeps x on a tie.
    z = np.array([-0.0, 0.0, -0.0, 0.0, 1.0, np.nan])
    w = np.array([0.0, -0.0, -0.0, 0.0, -0.0, 0.0])
    n = np.full((2, 3), -0.0)
    y = np.array([[0.0, 1.0], [2.0, 0.0]])
    inputs = {"F": f32, "K": k, "X": x, "Z": z, "W": w, "N": n, "Y": y}
    for name, a in inputs.items():
        np.save(d / f"{name}.npy", a)
    cases = ["F == 0.1", "F > 0.2", "F - 0.7", "F // 0.7", "F % 0.1", "F * 0.1", "F / 0.3", "F % 0.7",
             "maximum(F, 0.1)", "K // 1", "K % 1", "K // np.inf", "K % -np.inf", "K // -2.0", "K % 0.0", "K ** 0.5", "F ** 0.5", "power(K, 0.5)",
             "nanvar(X, axis=1)", "nanstd(X, axis=0)",
             "maximum(Z, W)", "maximum(W, Z)", "minimum(Z, W)", "minimum(W, Z)", "maximum(Z, 0.0)",
             "maximum(Z, -0.0)", "minimum(-0.0, W)", "maximum(0, W)", "maximum(Z, 0)",
             "clip(Z, 0, None)", "clip(Z, -0.0, None)", "clip(W, None, 0.0)", "clip(W, None, -0.0)",
             "clip(Z, -0.0, 0.0)", "clip(W, 0.0, -0.0)", "clip(Z, 0, 1)", "clip(W, -1, 0)", "clip(W, W, 0.0)",
             "clip(Z, W, W)", "clip(Z, -0.0, W)", "clip(Z, np.nan, 1)", "clip(K, 3, -1)",
             "outer(Z, W)", "outer(W, K)", "outer(K, Z)", "outer(F[:3], W)",
             "max(W)", "min(W)", "nanmax(W)", "nanmin(W)", "max(N)", "max(N, axis=0)", "min(N, axis=1)",
             "nanmax(Z)", "nanmin(Z)", "max(W[1:3])", "sum(N)", "sum(N, axis=1)", "prod(N)",
             # (NumPy's own einsum loses such a NaN in a few operand orders, e.g.
             # einsum('i,j->', X[0], Y[0]) is inf: nums-cloud always sums every product.)
             "einsum('ij,kl->il', X, Y)", "einsum('ij,kl->il', Y, X)", "einsum('i,j->', Y[0], X[0])",
             "einsum('ij,kl->', X, Y)", "einsum('ij,kl->', Y, X)", "einsum('ij,kl->ik', X, Y)",
             "einsum('ij,kl->lj', X, Y)", "einsum('ij,jk->k', X.T, Y)"]
    arrays = {n: {"load": str(d / f"{n}.npy"), "block": [3] if a.ndim == 1 else [1, 2]} for n, a in inputs.items()}
    results = run_cases(tmp_path, arrays, cases, {"url": f"file://{tmp_path / 'store'}"})
    failures = []
    for expr in cases:
        got, want = results[expr], numpy_answer(expr, inputs)
        assert got.dtype == want.dtype and got.shape == want.shape, expr
        # Same bits (NaNs compared as NaNs): signed zeros too.
        same = (got == want) & (np.signbit(got) == np.signbit(want)) if got.dtype.kind == "f" else got == want
        if got.dtype.kind == "f":
            same |= np.isnan(got) & np.isnan(want)
        if not same.all():
            failures.append(f"{expr}: {got} != NumPy {want}")
    assert not failures, "\n".join(failures)


# Numbers alone compute as Python computes them (`Number`), before NumPy sees the result,
# and a function of numbers is a NumPy scalar: strong beside a float32 array, as in NumPy.
NUMBER_CASES = [
    "~5 + I", "0 ** -np.inf", "-0.0 ** -np.inf", "True + True", "True * False", "(True + True) * I", "True - False", "-True",
    "+(1 > 0)", "2 ** -1 + A", "-7 // 2", "-7 % 2", "7.5 // -2", "2 ** 62 + I * 0",
    "floor(9)", "ceil(-9223372036854775807 - 1)", "floor(2.5)", "ceil(-0.5)", "abs(True)",
    "abs(logical_xor(-np.inf, False))", "isinf(3000000000)", "logical_not(3)", "logical_not(I)",
    "sqrt(2) * F", "F * exp(0)", "maximum(2.0, 3) * F", "clip(2.5, 0, 1) * F", "where(True, 2.0, 1) * F",
    "F * (2.0 + 0.5)", "F * -1", "F * (1 > 0)", "F * (sqrt(2) + 1)", "F * -sqrt(2)", "F * (floor(2.5) * 2)",
    # a NumPy scalar is a number where a number is wanted, as in NumPy
    "full((2,), sqrt(2))", "arange(floor(5.5))", "arange(7)[abs(-2)]", "sum(I, axis=abs(-1))",
    "ones((abs(-2), 3)) * I[0, 0]",
    "A * 10.0 ** 20", "np.nan + 1", "9007199254740993 == 9007199254740992.0", "3 < 2.5",
    # Python ints up to uint64's largest (a float array takes them as floats), complex numbers
    "9223372036854775807 * 2 + A", "-9223372036854775808 ** A[0, 0]", "(1 + 2j) * (3 - 1j) + A",
    "-(2j) + F", "2j ** 2 + A", "(1 + 1j) == 1 + 1j", "A + abs(9223372036854775808)",
    "floor(18446744073709551615) + A",
]
# What Python raises of numbers alone, and ints past int64 (nums-cloud has none larger),
# nums-cloud refuses at check.
NUMBER_REFUSED = {
    # Python computes 10**20 exactly: int64 would wrap it; nums-cloud refuses.
    "A * 10 ** 20": "past int64's range",
    "9223372036854775807 * 4 + A": "past int64's range (and uint64's)",
    "-(-9223372036854775807 - 1) + I * 0": "Python integer 9223372036854775808 out of bounds for int64",
    "3000000000 ** 3 + A": "past int64's range",
    "7 // 0 + I": "division by zero",
    "7 % 0 + A": "division by zero",
    "1.0 / 0 + A": "division by zero",
    "np.nan / False + A": "division by zero",
    "2.5 ** 1e308 + A": "overflows float64",
    "+M": "not supported for bool",
    "~True + A": "deprecated by Python",
    "~(1 > 2) + A": "deprecated by Python",
    "0.0 ** -1 + A": "division by zero",
    "negative(1 > 0)": "not supported for bool",
    "sign(True)": "sign is not defined for bool",
}


def test_numbers_compute_as_python_computes_them(tmp_path):
    """Operators of numbers alone are Python's, as in NumPy code (`X * 10**20` is not
    int64's wrapped 10**20: refused, as nums-cloud's ints stop at int64; `True + True` is
    2; `1.0 / 0` refused as Python raises); a function of numbers is a NumPy scalar
    (`floor(9)` an int64, `sqrt(2) * F` float64, `2.0 * F` float32)."""
    d = tmp_path / "in"
    d.mkdir()
    inputs = {n: INPUTS[n][0] for n in ("A", "F", "I", "M")}
    for n, a in inputs.items():
        np.save(d / f"{n}.npy", a)
    arrays = {n: {"load": str(d / f"{n}.npy"), "block": INPUTS[n][1]} for n in inputs}
    results = run_cases(tmp_path, arrays, NUMBER_CASES, {"url": f"file://{tmp_path / 'store'}"})
    failures = []
    for expr in NUMBER_CASES:
        got, want = results[expr], numpy_answer(expr, inputs)
        same = got.dtype == want.dtype and got.shape == want.shape and (
            ((got == want) & (np.signbit(got) == np.signbit(want))) | (np.isnan(got) & np.isnan(want))
            if got.dtype.kind == "f" else got == want).all()
        if not same:
            failures.append(f"{expr}: {got!r} != NumPy {want!r}")
    assert not failures, "\n".join(failures)
    for expr, why in NUMBER_REFUSED.items():
        with pytest.raises(Exception):  # noqa: B017 - NumPy's errors differ in type
            numpy_answer(expr, inputs)
        job = tmp_path / "refused.toml"
        job.write_text(job_text({**arrays, "y": expr}, {"y": str(tmp_path / "y.npy")},
                                storage={"url": f"file://{tmp_path / 'store'}"}))
        p = subprocess.run([BIN, "check", str(job)], capture_output=True, text=True, timeout=60)
        assert p.returncode != 0 and why in p.stderr and "arrays.y" in p.stderr, (expr, p.stderr)


def test_contractions_other_than_einsum_do_not_broadcast(tmp_path):
    """einsum broadcasts a length-1 axis (the table); NumPy's other contractions and an
    einsum's repeated letter in one operand do not, and nums-cloud refuses them too
    (matmul's batch axes broadcast, as the table's stacks show: not ones that clash)."""
    d = tmp_path / "in"
    d.mkdir()
    arrays = {}
    for n in ("A", "B", "C", "T", "X"):
        np.save(d / f"{n}.npy", INPUTS[n][0])
        arrays[n] = {"load": str(d / f"{n}.npy"), "block": INPUTS[n][1]}
    refused = {"T @ X": "batch shapes (4,) and (6,) do not broadcast",
               "einsum('ii', A[:1, :3])": "einsum letter 'i' has sizes 1 and 3",
               "einsum('ij,ji->', A[:1, :3], A[:2, :1])": "einsum letter 'j' has sizes 3 and 2",
               "tensordot(A[:, :1], C, axes=1)": "sizes 1 and 5", "dot(A[:, :1], C)": "sizes 1 and 5",
               "A[:, :1] @ C": "sizes 1 and 5", "inner(A[:, :1], B)": "sizes 1 and 5"}
    for expr, why in refused.items():
        with pytest.raises(ValueError):
            numpy_answer(expr)
        job = tmp_path / "job.toml"
        job.write_text(job_text({**arrays, "y": expr}, {"y": str(tmp_path / "y.npy")},
                                storage={"url": f"file://{tmp_path / 'store'}"}))
        p = subprocess.run([BIN, "check", str(job)], capture_output=True, text=True, timeout=60)
        assert p.returncode != 0 and why in p.stderr, (expr, p.stderr)


def test_powers_of_bools_are_numpys_ints(tmp_path):
    """NumPy squares bools in int8 (`square(M)`, `M ** 2`, `M ** True`), other powers of a
    Python int in int64: the same dtypes here, never bool."""
    d = tmp_path / "in"
    d.mkdir()
    m = INPUTS["M"][0]
    np.save(d / "M.npy", m)
    cases = ["square(M)", "M ** 2", "square(M) * 3", "M ** 3", "M ** True", "M ** M"]
    got = run_cases(tmp_path, {"M": {"load": str(d / "M.npy"), "block": [3, 2]}}, cases,
                    {"url": f"file://{tmp_path / 'store'}"})
    for expr in cases:
        want = numpy_answer(expr, {"M": m})
        assert got[expr].dtype == want.dtype and want.dtype.kind == "i", expr
        np.testing.assert_array_equal(got[expr], want, err_msg=expr)


# Every Array API dtype, on ragged blocks (complex inputs are z64 and z128: the outputs
# are c0, c1, ...): NumPy 2's promotion (arrays with arrays, and
# Python scalars as NEP 50 makes them weak), wrapping on overflow, uint64 with int64 as
# float64 (compared exactly), complex elementwise functions, reductions and contractions.
_dt = np.random.default_rng(26)


def _full_range(dtype):
    info = np.iinfo(dtype)
    a = _dt.integers(info.min, info.max, size=(7, 5), dtype=dtype, endpoint=True)
    a[0, 0], a[6, 4] = info.min, info.max  # the extremes wrap in -x, abs and sums
    return a


_c = _dt.normal(size=(7, 5)) + 1j * _dt.normal(size=(7, 5))
_c[1, 1], _c[2, 3] = 0, 2.5  # zero, and a real number with an imaginary part 0
DTYPE_INPUTS = {
    "i8": _full_range(np.int8), "i16": _full_range(np.int16), "i32": _full_range(np.int32),
    "i64": _full_range(np.int64), "u8": _full_range(np.uint8), "u16": _full_range(np.uint16),
    "u32": _full_range(np.uint32), "u64": _full_range(np.uint64),
    "f32": _dt.normal(size=(7, 5)).astype(np.float32), "f64": _dt.normal(size=(7, 5)),
    "z64": (_c * 0.5).astype(np.complex64), "z128": _c, "bb": _dt.random(size=(7, 5)) < 0.5,
    # small ints (zeros and negatives) for division, powers and contractions that stay in range
    "s8": _dt.integers(-3, 4, size=(7, 5), dtype=np.int8), "t16": _dt.integers(0, 5, size=(7, 5), dtype=np.uint16),
}
# complex NaN and infinities: NaN propagates through max/min and sums, nan-reductions skip it
_zn = _c.copy()
_zn[0, 1], _zn[3, 2], _zn[5, 4] = complex(np.nan, 0), complex(1, np.nan), complex(np.inf, -np.inf)
DTYPE_INPUTS["zn"] = _zn
_NAMES = ["bb", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f32", "f64", "z64", "z128"]
DTYPE_CASES = [
    # promotion of every pair of dtypes (np.result_type of arrays), values of + and ==
    *[f"{a} + {b}" for i, a in enumerate(_NAMES) for b in _NAMES[i:] if (a, b) != ("bb", "bb")],
    "bb + bb", "bb * bb",
    *[f"{a} == {b}" for a, b in [("i64", "u64"), ("u64", "f64"), ("i8", "u8"), ("z64", "f32"), ("u32", "i32")]],
    # NEP 50: Python scalars take the array's dtype where their kind fits
    *[f"{a} + 1" for a in _NAMES], *[f"{a} * 2.5" for a in _NAMES], *[f"{a} + 1j" for a in _NAMES],
    *[f"{a} > 1" for a in _NAMES], *[f"{a} - True" for a in _NAMES if a != "bb"],
    "2 - i8", "0.5 / u16", "3 ** s8.astype('uint8')", "1j * f32", "(1 + 2j) * (3 - 1j) + f64",
    # ints out of the array's range compare exactly (NumPy 2's comparisons of Python ints)
    "u8 > -1", "i8 < 300", "u64 == -1", "i16 >= -40000", "u8 != 256", "i64 > 9223372036854775808",
    "9223372036854775808 > i64", "-3 < u16",
    # Python ints up to uint64's largest
    "u64 == 18446744073709551615", "u64 - 9223372036854775808", "f64 + 9223372036854775808",
    "18446744073709551615 // 7 + u64 * 0", "2 ** 63 + u64", "u64 + abs(9223372036854775808)",
    "i8 * square(2 ** 40)",
    # wrapping on overflow, in every width
    "i8 * i8", "i8 + 100", "u8 - 3", "u8 * u8", "-u8", "-i8", "abs(i8)", "abs(i64)", "i16 * 300",
    "i32 * i32", "u32 + u32", "u64 + u64", "u64 * 3", "-u64", "square(i8)", "u16 ** 2", "i8 ** 3",
    # division, floor division and remainder by ints with zeros (NumPy gives 0 there)
    "i8 / s8", "u16 / t16", "i8 // s8", "i8 % s8", "u16 // t16", "u16 % t16", "i32 // 7", "u64 // 3",
    "u64 % 1000", "i64 // u8", "s8 ** t16", "bb ** bb", "bb // bb", "bb % bb", "bb ** 2", "bb ** 3",
    # uint64 with int64: float64 arithmetic, exact comparisons and extremes
    "u64 + i64", "u64 - i64", "u64 > i64", "u64 <= i64", "maximum(u64, i64)", "minimum(u64, i64)",
    "where(bb, u64, i64)", "concatenate((u64, i64))",
    # unary functions of ints (float32 for 16-bit ints, float64 for wider ones)
    "sign(i16)", "square(u8)", "floor(i8)", "ceil(u32)", "exp(i16)", "sqrt(u16)", "log1p(u32)",
    "sin(i32)", "tanh(i64)", "exp(f32)", "abs(bb)", "floor(bb)", "conj(bb)", "real(i8)", "imag(u16)",
    "conj(i32)", "angle(i32)", "angle(bb)", "angle(f32)", "isnan(i8)", "isfinite(u64)",
    # complex elementwise
    "z128 + z64", "z64 * f32", "z64 + f64", "z64 * i16", "z64 * i32", "z128 - u64", "z128 / z64",
    "z128 / f64", "z64 / z64", "z128 ** 2", "z128 ** z64", "z64 ** 0.5", "2 ** z128",
    "abs(z128)", "abs(z64)", "real(z64)", "imag(z128)", "z128.real", "z64.imag", "conj(z128)",
    "conjugate(z64)", "angle(z128)", "angle(z64, deg=True)", "exp(z128)", "exp(z64)", "log(z128)",
    "log(z64)", "sqrt(z128)", "sqrt(z64)", "expm1(z128)", "log1p(z128)", "sin(z128)", "cos(z64)",
    "tan(z128)", "tanh(z128)", "square(z128)", "sign(z128)", "sign(z64)", "-z64", "isnan(z128)",
    "isfinite(z64)", "isinf(z128 / 0)", "z128 == z64", "z128 != conj(z128)", "z128 < z64",
    "z64 >= 0", "maximum(z128, z64)", "minimum(z64, 0)", "clip(z128, 0, 1)", "where(bb, z128, 1j)",
    "where(z128.real > 0, z64, f32)", "z128 * 1j", "2 + 3j + i8", "logical_and(z128, bb)",
    "logical_not(z128)", "sign(zn)", "abs(zn)", "sqrt(zn)", "isnan(zn)", "isinf(zn)", "zn < 1",
    "maximum(zn, 0)", "minimum(zn, z128)", "1 / zn", "zn ** 2", "angle(zn)",
    # tan and tanh where num-complex's formulas divide infinities (NaN), and at C99's special values
    "tan(z128 * 300)", "tanh(z128 * 300)", "tan(z64 * 300)", "tanh(zn)", "tan(zn)",
    # a negative NaN operand keeps its sign (NumPy's signbit sees it)
    "signbit(f64 * 0 + -np.nan)", "signbit(full((2, 3), -np.nan))",
    # reductions in NumPy's dtypes: sums in int64 or uint64, extremes in their own
    "sum(i8)", "sum(i8, axis=0)", "sum(u8, axis=1)", "sum(u64)", "sum(u64, axis=0)", "prod(i16, axis=1)",
    "prod(u32, axis=0)", "sum(bb)", "sum(i32, axis=(0, 1), keepdims=True)", "max(i8, axis=0)",
    "min(u64)", "max(u16)", "min(bb, axis=1)", "mean(i32, axis=0)", "mean(u64)", "var(u16)",
    "std(i8, axis=1)", "argmax(u64, axis=0)", "argmin(i8)", "argmax(i16, axis=1)", "all(u8)",
    "any(i8, axis=0)", "nansum(u16, axis=0)", "nanmax(u8, axis=1)", "nanprod(s8, axis=0)",
    "sum(z128)", "sum(z64, axis=0)", "prod(z128, axis=1)", "mean(z64)", "mean(z128, axis=1)",
    "var(z128)", "var(z64, axis=0)", "std(z64, axis=1)", "std(z128)", "max(z128, axis=0)", "min(z64)",
    "argmax(z128, axis=1)", "argmin(z64)", "all(z128)", "any(z64, axis=1)", "nansum(z128)",
    "nanmean(z128, axis=0)", "nanvar(z64)", "nanmax(z128, axis=1)", "nanargmin(z128, axis=0)",
    "sum(f32, axis=1)", "mean(f32)", "var(f32, axis=0)", "max(zn, axis=0)", "min(zn)", "nanmax(zn, axis=1)",
    "nanmin(zn, axis=0)", "argmax(zn, axis=0)", "argmin(zn, axis=1)", "nanargmax(zn, axis=0)", "sum(zn, axis=0)",
    "nansum(zn, axis=1)", "nanmean(zn, axis=0)", "nanvar(zn, axis=0)", "nanprod(zn, axis=0)",
    "np.linalg.norm(zn, axis=0)",
    # contractions: ints in their own dtype (wrapping), complex through BLAS's complex GEMM
    "i8 @ i8.T", "u8 @ u8.T", "i16 @ u16.T", "s8 @ t16.T", "bb @ bb.T", "u64 @ u64.T", "u64 @ i64.T",
    "z128 @ z128.T", "z64 @ z64.T", "z64 @ f32.T", "z128 @ f64.T", "z64 @ i8.T", "z64 @ f64.T",
    "f32 @ f32.T", "z128 @ z128[0]", "z64[1] @ z64.T",
    "einsum('ij,ij->i', z128, z64)", "einsum('ij,kj->ik', z64, z64)", "einsum('ij->', u8)",
    "einsum('ij->j', i16)", "einsum('ij,ij->j', s8, t16)", "tensordot(z64, z64, axes=2)",
    "tensordot(z128, f32, axes=([0], [0]))", "dot(z128[0], z128[1])", "dot(z64, z64[0])",
    "outer(z64[0], i8[0])", "inner(z128, z128)", "inner(u16, u16)", "trace(z128[:5])", "trace(i8[:5])",
    "trace(u8[:5])", "trace(bb[:5])", "np.linalg.norm(z128)", "np.linalg.norm(z64, axis=1)",
    "np.linalg.norm(z128, 1)", "np.linalg.norm(z128[0], np.inf)", "np.linalg.norm(z64, 'fro')",
    "np.linalg.norm(i8)", "np.linalg.norm(u16, axis=0)", "np.linalg.lstsq(f64, z128.real[:, 0])[2]",
    "np.linalg.lstsq(i16.astype('float64'), f64)[2]",
    # complex linear algebra (complex64 computed in complex128): LU in one task, TSQR and
    # blocked Cholesky on complex blocks
    "np.linalg.inv(z128[:5])", "np.linalg.solve(z128[:5], z64[:5, 0])", "np.linalg.solve(z128[:5], f64[:5])",
    "np.linalg.solve(f64[:5], z128[:5])", "np.linalg.det(z128[:5])", "np.linalg.det(z64[:5])",
    "np.linalg.slogdet(z128[:5]).sign", "np.linalg.slogdet(z64[:5]).logabsdet", "np.linalg.svdvals(z128)",
    "np.linalg.svdvals(z64)", "np.linalg.svd(z128, full_matrices=False).S", "np.linalg.norm(z128, 2)",
    "np.linalg.norm(z64, 'nuc')", "np.linalg.norm(z128, -2)", "abs(np.linalg.qr(z128).R)",
    "np.linalg.qr(z64)[0] @ np.linalg.qr(z64)[1]",
    "np.linalg.cholesky(z128[:5] @ conj(z128[:5]).T + 5 * eye(5))",
    # casts, and creation in every dtype
    "f64.astype('int8')", "(f64 * 100).astype('uint8')", "i64.astype('uint8')", "u64.astype('float32')",
    "i8.astype('complex64')", "f64.astype(np.int16)", "z128.astype('complex64')", "i16.astype('bool')",
    "u64.astype('int64')", "i64.astype(np.uint32)", "astype(z64, 'complex128')", "i8.astype(u64.dtype)",
    "zeros((2, 3), dtype='int8')", "ones(4, dtype=np.uint16)", "full((2, 2), 1 + 2j)",
    "full((2, 2), 3, dtype='complex64')", "arange(5, dtype='uint8')", "arange(3, dtype='complex128')",
    "arange(250, 260, 3, dtype=np.uint8)", "eye(3, dtype='int32')", "linspace(0, 10, 4, dtype='int16')",
    "linspace(-10, 0, 4, dtype=np.int8)", "zeros_like(z64)", "full_like(i8, 7)", "ones_like(u64)",
    "full((3,), -1, dtype='int16')", "zeros(3, dtype=complex)", "ones((2, 2), dtype=int)", "i8.astype(float)",
    "f64.astype(bool)", "u8.astype(np.uint16) * 300", "i16.astype('<i4')", "u8.astype(np.double)",
    # shapes and selections keep the dtype
    "i8[::2, 1:]", "z128.T", "reshape(z64, (5, 7))", "u64[[0, 2]]", "z128[z128.real[:, 0] > 0]", "transpose(u16)",
    "concatenate((i8, u8))", "stack((z64, f32))", "where(bb, i8, u8)", "where(bb, i8, 1)",
    "where(bb, f32, 2j)", "expand_dims(z64, 0)[:, 1:3]", "ravel(u32)[::7]",
    # cumulative, sorting and sets in every dtype (sums in sum_dtype; complex in NumPy's order)
    "cumsum(i8, axis=0)", "cumsum(u8)", "cumprod(u16, axis=1)", "cumsum(bb, axis=1)", "cumsum(z128, axis=0)",
    "cumprod(z64, axis=1)", "cumsum(f32, axis=1)", "diff(u8, axis=0)", "diff(z64)", "sort(i8, axis=0)",
    "sort(u64, axis=None)", "sort(z128, axis=None)", "sort(z64, axis=0)", "argsort(u16, axis=None, kind='stable')",
    "argsort(z128, axis=0, kind='stable')", "sort(bb, axis=1)", "unique(i16)", "unique(z64)",
    "unique(u8, return_counts=True)[1]", "searchsorted(sort(ravel(i32)), i32)", "isin(u8, u8[0])",
    "count_nonzero(z128, axis=0)", "flatnonzero(i8 > 0)",
    "median(i8, axis=0)", "median(u64)", "percentile(f32, 30, axis=1)", "quantile(u8, 0.5, method='nearest')",
    "nanmedian(f32, axis=0)", "ptp(u8, axis=0)", "ptp(i8)", "average(i16, axis=0, weights=u8[:, 0])", "cov(f32)",
    "cov(z128)", "corrcoef(i32)", "histogram(u16, bins=4)[0]", "bincount(ravel(u8))",
    # rounding, float functions and bitwise ops in every dtype (NumPy's promotion; shifts past the width)
    "round(f32, 2)", "round(z128, 1)", "round(i8, -1)", "round(u16)", "round(i64, -3)", "rint(z64)", "trunc(u8)",
    "trunc(bb)", "log2(z128)", "log10(i16)", "signbit(i8)", "signbit(u64)", "signbit(f32)", "arcsin(z128)",
    "arccosh(z64)", "sinh(z128)", "arccos(z128)", "arctanh(z128)", "arcsinh(z128 * 1j)", "arctan(z128 * 1j)",
    "arccosh(z128)", "arctan2(i16, i16)", "hypot(i32, u8)", "copysign(f32, i8)", "logaddexp(u16, u16)",
    "nextafter(f32, f64)", "nextafter(f32, f32 * 0)", "nextafter(i16, u16)", "i8 & u8", "u16 | i32", "i64 ^ i64",
    "u64 & u64", "~u8", "~i16", "~u64", "u8 << 3", "i8 << 9", "i8 >> s8", "u64 >> 3", "i16 << t16", "bb << bb",
    "bitwise_and(bb, bb)", "i8 & bb", "bitwise_xor(u32, 7)", "right_shift(i32, 31)", "left_shift(u8, t16)",
    "i8 >> 200 // 20", "s8 << s8",
    # manipulation keeps the dtype
    "flip(z64, axis=1)", "roll(u64, 3)", "tile(i8[0], 2)", "repeat(bb, 2, axis=0)", "tril(z128)", "triu(u16, -1)",
    "diagonal(i8)", "pad(u8, 1, constant_values=255)", "pad(z64, (0, 1))", "take(u64, [1, 1], axis=0)",
    "broadcast_to(z64[0], (2, 7, 5))", "u8 * [1, 2, 3, 4, 5]", "f32 * [1.5, 2, 3, 4, 5]", "i8 + [1j, 2, 3, 4, 5]",
]
# Where nums-cloud differs from NumPy on purpose (README's differences): NumPy's float16
# results of float functions of bool, int8 and uint8 are float32 here (no float16).
FLOAT16_CASES = ["exp(i8)", "sqrt(u8)", "sin(bb)", "log1p(u8)", "angle(i8)", "log2(i8)", "round(bb)",
                 "arctan2(u8, u8)", "hypot(bb, i8)"]
# Refused when checked, as NumPy raises.
DTYPE_ERRORS = {
    "i8 + 300": "Python integer 300 out of bounds for int8",
    "u64 + -1": "Python integer -1 out of bounds for uint64",
    "maximum(u8, 256)": "Python integer 256 out of bounds for uint8",
    "full(3, 300, dtype='int8')": "Python integer 300 out of bounds for int8",
    "i64 + 9223372036854775808": "Python integer 9223372036854775808 out of bounds for int64",
    "bb > 9223372036854775808": "Python integer 9223372036854775808 out of bounds for int64",
    "full_like(u16, -1)": "Python integer -1 out of bounds for uint16",
    "z128 // z64": "// is not defined for complex numbers",
    "z64 % 2": "% is not defined for complex numbers",
    "floor(z128)": "floor is not defined for complex numbers",
    "u16 ** -1": "Python integer -1 out of bounds for uint16",
    "i16 ** -2": "Integers to negative integer powers are not allowed",
    "np.linalg.lstsq(f64, z128)": "nums-cloud's lstsq takes real matrices",
    "astype(f64, 'float16')": "has no dtype float16",
    "linear_regression(z128, f64[:, 0])": "X and y must be real numbers, not complex128",
    "i64 & u64": "& is defined for bools and integers",
    "f64 << 1": "<< is defined for bools and integers",
    "~f32": "~ and bitwise_invert need a bool or integer array",
    "trunc(z128)": "trunc is not defined for complex numbers",
    "arctan2(z128, f64)": "arctan2 is not defined for complex numbers",
    "signbit(z64)": "signbit is not defined for complex numbers",
}


def _dtype_arrays(tmp_path, inputs, block=(3, 2)):
    d = tmp_path / "in"
    d.mkdir(exist_ok=True)
    for name, a in inputs.items():
        np.save(d / f"{name}.npy", a)
    return {n: {"load": str(d / f"{n}.npy"), "block": list(block[:a.ndim])} for n, a in inputs.items()}


def _dtype_failures(cases, got):
    failures = []
    for expr in cases:
        try:
            want = numpy_answer(expr, DTYPE_INPUTS)
            g = got[expr]
            assert g.shape == want.shape and g.dtype == want.dtype, \
                f"shape {g.shape} dtype {g.dtype}, NumPy {want.shape} {want.dtype}"
            if want.dtype.kind in "biu":
                np.testing.assert_array_equal(g, want)
            else:
                # float32 and complex64 round once where NumPy may round twice; floating
                # reductions and contractions sum in another order.
                rtol = 2e-6 if want.dtype in (np.float32, np.complex64) else 1e-12
                if expr.startswith(("sum", "mean", "var", "std", "prod", "nan", "np.linalg", "einsum", "dot",
                                    "inner", "tensordot", "trace")) or "@" in expr:
                    rtol = 1e-5 if want.dtype in (np.float32, np.complex64) else 1e-10
                fin = np.isfinite(want)
                scale = float(np.max(np.abs(want[fin]))) if fin.any() else 1.0
                np.testing.assert_allclose(g, want, rtol=rtol, atol=rtol * 1e-2 * max(scale, 1.0), equal_nan=True)
        except AssertionError as e:
            failures.append(f"{expr}: " + " ".join(str(e).split())[:300])
    return failures


def test_every_dtype_matches_numpy(tmp_path):
    got = run_cases(tmp_path, _dtype_arrays(tmp_path, DTYPE_INPUTS), DTYPE_CASES,
                    {"url": f"file://{tmp_path / 'store'}"})
    failures = _dtype_failures(DTYPE_CASES, got)
    assert not failures, f"{len(failures)} of {len(DTYPE_CASES)} cases differ from NumPy:\n" + "\n".join(failures)


# Complex functions at every magnitude, on both sides of the branch cuts (signed zeros), at
# infinities and NaNs, where NumPy calls the C library's C99 functions (Annex G):
# arccos(3e19-1.1e19j) was nan+infj, sqrt(inf+1j) inf+nanj and sin(infj) nan+infj.
_inf, _nan = np.inf, np.nan
_ZE = np.array([complex(*p) for p in [
    (1e-300, 1e-300), (-1e-300, 2e-300), (1e-8, -1e-8), (-1e-8, 2e-8), (0.5, -2.0), (1.0, 1.0),
    (-3.0, 0.25), (20.0, 0.5), (710.0, 1.0), (-710.0, 1.0), (1e8, -1e8), (3e19, -1.1e19),
    (-3e38, 2e38), (1e300, 1e-300), (-1e300, -1e300), (1e-300, 1e300), (2.0, 0.0), (2.0, -0.0),
    (-2.0, 0.0), (-2.0, -0.0), (0.0, 2.0), (-0.0, 2.0), (0.0, -2.0), (0.5, 0.0), (0.0, 0.0),
    (-0.0, -0.0), (_inf, 0.0), (_inf, 1.0), (-_inf, 1.0), (_inf, -1.0), (1.0, _inf), (0.0, _inf),
    (-1.0, -_inf), (_inf, _inf), (-_inf, _inf), (-_inf, -_inf), (_inf, _nan), (-_inf, _nan),
    (_nan, _inf), (_nan, 0.0), (_nan, 1.0), (0.0, _nan), (1.0, _nan), (_nan, _nan), (-_inf, 0.0)]])
_C99_FUNCS = ["sqrt", "exp", "expm1", "log", "log1p", "log2", "log10", "sin", "cos", "tan", "sinh",
              "cosh", "tanh", "arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh"]


def test_complex_functions_at_every_magnitude_match_numpy(tmp_path):
    """Every complex elementwise function and powers on complex128 and complex64 values
    from 1e-300 to 1e300, infinities and NaNs, on ragged blocks: NumPy's values (to an ulp or two where
    finite, the same infinities, zeros' signs and NaNs)."""
    with np.errstate(over="ignore"):
        inputs = {"ze": _ZE, "zf": _ZE.astype(np.complex64)}
    cases = [f"{f}({a})" for f in _C99_FUNCS for a in inputs]
    cases += [f"{a} ** {b}" for a in inputs for b in ("0.5", "2.5", "(-1.5 + 1j)", "ze[::-1]")]
    got = run_cases(tmp_path, _dtype_arrays(tmp_path, inputs, block=(7,)), cases,
                    {"url": f"file://{tmp_path / 'store'}"})
    failures = []
    for expr in cases:
        want = numpy_answer(expr, inputs)
        if expr in ("log1p(zf)", "zf ** 2.5", "zf ** (-1.5 + 1j)"):
            # NumPy's complex64 log1p is log(hypotf(x + 1, y)) in float: 0 for log1p(1e-8j)'s
            # real part, inf past 3.4e38; its cpowf is 3e-6 off. The engine's: complex128's
            # rounded once (README).
            with np.errstate(over="ignore"):
                want = numpy_answer(expr.replace("zf", "zf.astype('complex128')"), inputs)
                want = want.astype(np.complex64)
        g = got[expr]
        # complex64: the engine computes in complex128 and rounds once, NumPy in float.
        rtol = 1e-6 if want.dtype == np.complex64 else 1e-15
        try:
            assert g.dtype == want.dtype, f"dtype {g.dtype}, NumPy {want.dtype}"
            for part in (np.real, np.imag):
                w, v = part(want), part(g)
                np.testing.assert_allclose(v, w, rtol=rtol, atol=0, equal_nan=True)
                zero = w == 0
                np.testing.assert_array_equal(np.signbit(v[zero]), np.signbit(w[zero]))
        except AssertionError as e:
            bad = [f"{z}: {a} (NumPy {b})" for z, a, b in zip(_ZE, g, want)
                   if not (np.isclose(a, b, rtol=rtol, atol=0, equal_nan=True)
                           and np.signbit(a.real) == np.signbit(b.real))]
            failures.append(f"{expr}: " + (", ".join(bad[:4]) or " ".join(str(e).split())[:300]))
    assert not failures, f"{len(failures)} of {len(cases)} differ from NumPy:\n" + "\n".join(failures)


def test_every_dtype_on_other_blocks_with_the_naive_scheduler(tmp_path):
    got = run_cases(tmp_path, _dtype_arrays(tmp_path, DTYPE_INPUTS, block=(2, 5)), DTYPE_CASES,
                    {"url": f"file://{tmp_path / 'store'}"}, compute={"scheduler": "naive", "memory_mb": 1024})
    failures = _dtype_failures(DTYPE_CASES, got)
    assert not failures, f"{len(failures)} of {len(DTYPE_CASES)} cases differ from NumPy:\n" + "\n".join(failures)


def test_float_functions_of_small_ints_are_float32_where_numpy_has_float16(tmp_path):
    got = run_cases(tmp_path, _dtype_arrays(tmp_path, DTYPE_INPUTS), FLOAT16_CASES,
                    {"url": f"file://{tmp_path / 'store'}"})
    for expr in FLOAT16_CASES:
        want = numpy_answer(expr, DTYPE_INPUTS)
        assert want.dtype == np.float16 and got[expr].dtype == np.float32, expr
        # float16 keeps 11 bits: NumPy's values are ours rounded to it (inf past its range).
        with np.errstate(over="ignore"):
            np.testing.assert_array_equal(got[expr].astype(np.float16), want, err_msg=expr)


def test_dtype_errors_are_refused_as_numpy_raises(tmp_path):
    arrays = _dtype_arrays(tmp_path, DTYPE_INPUTS)
    job = tmp_path / "job.toml"
    for expr, message in DTYPE_ERRORS.items():
        if not expr.startswith(("np.linalg", "linear_regression")) and "float16" not in expr:
            with pytest.raises((OverflowError, TypeError, ValueError)):
                numpy_answer(expr, DTYPE_INPUTS)
        job.write_text(job_text({**arrays, "y": expr}, {"y": str(tmp_path / "y.npy")},
                                storage={"url": f"file://{tmp_path / 'store'}"}))
        p = subprocess.run([BIN, "check", str(job)], capture_output=True, text=True, timeout=60)
        assert p.returncode == 1 and message in p.stderr and "arrays.y" in p.stderr, (expr, p.stderr)


def test_check_shows_numpys_result_dtypes(tmp_path):
    """`check` (nothing runs) gives each output NumPy's result dtype: np.result_type of
    every pair of array dtypes, and NEP 50's weak Python scalars."""
    import json
    cases = [f"{a} {op} {b}" for a in _NAMES for b in _NAMES for op in ("+", "/")
             if not (a == b == "bb" and op == "+")]
    cases += [f"{a} {op} {v}" for a in _NAMES for op in ("*", "**") for v in ("3", "0.5", "2j")]
    arrays = _dtype_arrays(tmp_path, DTYPE_INPUTS)
    arrays.update({f"c{i}": e for i, e in enumerate(cases)})
    job = tmp_path / "job.toml"
    job.write_text(job_text(arrays, {f"c{i}": str(tmp_path / f"c{i}.npy") for i in range(len(cases))},
                            storage={"url": f"file://{tmp_path / 'store'}"}))
    p = subprocess.run([BIN, "check", "--json", str(job)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    got = {o["name"]: o["dtype"] for o in json.loads(p.stdout)["output_arrays"]}
    wrong = [f"{e}: {got[f'c{i}']}, NumPy {numpy_answer(e, DTYPE_INPUTS).dtype}"
             for i, e in enumerate(cases) if got[f"c{i}"] != str(numpy_answer(e, DTYPE_INPUTS).dtype)]
    assert not wrong, "\n".join(wrong)


def test_dtype_subset_on_garage(garage, tmp_path):
    cases = DTYPE_CASES[::9]
    arrays = _dtype_arrays(tmp_path, DTYPE_INPUTS)
    got = run_cases(tmp_path, arrays, cases, {"url": f"s3://{garage.bucket}/dtypes", "endpoint": garage.endpoint},
                    env=garage.env())
    failures = _dtype_failures(cases, got)
    assert not failures, "\n".join(failures)


def test_table_is_large_enough():
    assert len(CASES) >= 120 and len(set(CASES)) == len(CASES)


def test_conformance_table_on_file_store(tmp_path):
    got = run_table(tmp_path, CASES, {"url": f"file://{tmp_path / 'store'}"})
    failures = []
    for expr in CASES:
        try:
            assert_matches(expr, got[expr], numpy_answer(expr))
        except AssertionError as e:
            failures.append(f"{expr}: " + " ".join(str(e).split())[:300])
    assert not failures, f"{len(failures)} of {len(CASES)} cases differ from NumPy:\n" + "\n".join(failures)


def test_other_block_shapes_and_naive_scheduler_give_the_same_results(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = run_table(tmp_path / "a", CASES, {"url": f"file://{tmp_path / 'a' / 'store'}"})
    b = run_table(tmp_path / "b", CASES, {"url": f"file://{tmp_path / 'b' / 'store'}"}, blocks=2,
                  scheduler="naive")
    for expr in CASES:
        assert a[expr].shape == b[expr].shape and a[expr].dtype == b[expr].dtype, expr
        if a[expr].dtype.kind == "f":
            rtol = 1e-5 if a[expr].dtype == np.float32 else 1e-12
            np.testing.assert_allclose(a[expr], b[expr], rtol=rtol, atol=1e-12, equal_nan=True, err_msg=expr)
        else:
            np.testing.assert_array_equal(a[expr], b[expr], err_msg=expr)


def test_same_job_gives_bitwise_identical_results(tmp_path):
    """Reduction trees are fixed: running the same job twice gives the same bits."""
    cases = ["sum(A)", "mean(T, axis=(0, 2))", "A.T @ A", "einsum('ijk,jf,kf->if', X, U, V)", "std(A, axis=0)"]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = run_table(tmp_path / "a", cases, {"url": f"file://{tmp_path / 'a' / 'store'}"})
    b = run_table(tmp_path / "b", cases, {"url": f"file://{tmp_path / 'b' / 'store'}"})
    for expr in cases:
        assert a[expr].tobytes() == b[expr].tobytes(), expr


def test_conformance_subset_on_garage(garage, tmp_path):
    got = run_table(tmp_path, GARAGE_SUBSET, {"url": f"s3://{garage.bucket}/conformance", "endpoint": garage.endpoint},
                    env=garage.env())
    for expr in GARAGE_SUBSET:
        assert_matches(expr, got[expr], numpy_answer(expr))


def test_load_csv(tmp_path):
    data = rng.normal(size=(6, 3))
    path = tmp_path / "d.csv"
    path.write_text("# a comment\n" + "\n".join(",".join(repr(float(x)) for x in row) for row in data) + "\n")
    job = tmp_path / "job.toml"
    job.write_text(job_text({"D": {"load": str(path), "block": [4, 2]}, "s": "D.sum(axis=0) / D.shape[0]"},
                            {"s": str(tmp_path / "s.npy")}, storage={"url": f"file://{tmp_path / 'store'}"}))
    run(job)
    np.testing.assert_allclose(np.load(tmp_path / "s.npy"), data.mean(axis=0), rtol=1e-12)
    bad = tmp_path / "bad.csv"
    bad.write_text("1,2\n3,x\n")
    job.write_text(job_text({"D": {"load": str(bad)}}, {"D": str(tmp_path / "o.npy")},
                            storage={"url": f"file://{tmp_path / 'store'}"}))
    p = run(job, check=False)
    assert p.returncode != 0 and "bad.csv:2: column 2" in p.stderr and "'x'" not in p.stderr.split(":")[0], p.stderr


def test_random_integers_in_range_and_deterministic(tmp_path):
    arrays = {"R": {"random": "integers", "low": -3, "high": 4, "shape": [200, 50], "seed": 5, "block": [64, 16]},
              "Q": {"random": "integers", "low": -3, "high": 4, "shape": [200, 50], "seed": 5, "block": [200, 50]}}
    job = tmp_path / "job.toml"
    job.write_text(job_text(arrays, {"R": str(tmp_path / "R.npy"), "Q": str(tmp_path / "Q.npy")},
                            storage={"url": f"file://{tmp_path / 'store'}"}))
    run(job)
    r, q = np.load(tmp_path / "R.npy"), np.load(tmp_path / "Q.npy")
    assert r.dtype == np.int64 and r.min() == -3 and r.max() == 3
    np.testing.assert_array_equal(r, q)  # values do not depend on the block shape
    counts = np.bincount(r.ravel() + 3)
    assert counts.min() > 0.8 * r.size / 7


# Zero-length arrays are NumPy arrays: they compute, reduce to NumPy's identities and are
# refused with NumPy's errors where NumPy has no answer.
EMPTY_INPUTS = {"E": np.zeros((0, 4)), "G": rng.normal(size=(3, 4)), "u": np.arange(5.0),
                "H": np.zeros((0, 3), dtype=np.int64)}
EMPTY_CASES = [
    # creation, slices, masks and index lists selecting nothing
    "E", "zeros((0, 4))", "ones(0, dtype='int64')", "full((2, 0), 3)", "eye(0)", "eye(0, 3)",
    "arange(0)", "arange(5, 1)", "linspace(0, 1, 0)", "G[5:5]", "G[2:2, :]", "G[:, 3:1]",
    "G[G[:, 0] > 100]", "u[u > 100] + 1", "G[[False, False, False]]", "G[[]]", "E[E[:, 0] > 0]",
    "E[:, 1]", "E[::-1, ::2]", "reshape(E, (4, 0))", "E.reshape(-1, 4)", "E.T", "expand_dims(E, 0)",
    "squeeze(zeros((0, 1)))", "E.astype('int64')",
    # elementwise and broadcasting
    "E + 1", "E * G[0]", "exp(E)", "where(E > 0, E, 1)", "E + ones((1, 4))", "zeros((3, 1)) + zeros(0)",
    "zeros((0, 1)) * ones((1, 5))", "clip(E, 0, 1)", "isnan(E)", "maximum(E, 0)",
    # reductions over every axis: sum 0, prod 1, mean NaN, any False, all True
    "sum(E)", "sum(E, axis=0)", "sum(E, axis=1)", "sum(E, axis=())", "prod(E)", "prod(E, axis=0)",
    "prod(E, axis=1)", "prod(H, axis=0)", "sum(H)", "sum(E > 0)", "mean(E)", "mean(E, axis=0)",
    "mean(E, axis=1)", "mean(E, axis=(0, 1), keepdims=True)", "var(E)", "var(E, axis=0, ddof=1)",
    "std(E, axis=1)", "nansum(E, axis=0)", "nanprod(E)", "nanmean(E, axis=0)", "nanvar(E)",
    "any(E)", "all(E)", "any(E, axis=0)", "all(zeros((2, 0)), axis=1)", "max(E, axis=1)",
    "G[:, 4:].max(0)", "argmax(E, axis=1)", "nanargmin(E, axis=1)", "G[:0].sum(0)",
    # contractions over an empty dimension: zeros of the right shape
    "E @ G.T", "ones((2, 0)) @ ones((0, 3))", "E.T @ E", "G[:, :0] @ E", "E @ ones(4)", "ones(0) @ E",
    "dot(u[:0], u[:0])", "outer(u[:0], u)", "inner(E, E)", "tensordot(E, E, axes=([0], [0]))",
    "einsum('ij->', E)", "einsum('ij,kj->ik', E, G)", "einsum('ii->i', zeros((0, 0)))",
    "trace(E)",
    # concatenation with an empty piece
    "concatenate((G, E))", "concatenate((E, G, E))", "concatenate((E, E))", "stack((E, E))",
    "vstack((E, G))", "hstack((u[:0], u))",
    # norms (NumPy's max with initial=0)
    "np.linalg.norm(E)", "np.linalg.norm(E, np.inf)", "np.linalg.norm(E, 1)", "np.linalg.norm(E, 2)",
    "np.linalg.norm(E, 'nuc')", "np.linalg.norm(u[:0], np.inf)", "np.linalg.norm(u[:0], -3)",
    "np.linalg.norm(E, axis=0)", "np.linalg.norm(E, -1)",
    # linear algebra of empty matrices: NumPy's empty factors, det 1
    "np.linalg.qr(E.T)[0]", "np.linalg.qr(E.T, mode='r')", "np.linalg.svd(E, full_matrices=False).Vh",
    "np.linalg.svd(E.T, full_matrices=False).U", "np.linalg.svdvals(E)", "np.linalg.lstsq(E.T, G[0])[0]",
    "np.linalg.lstsq(E.T, G[0])[1]", "np.linalg.lstsq(E.T, G.T)[1]", "np.linalg.lstsq(E.T, G[0])[3]",
    "np.linalg.solve(eye(0), zeros((0, 3)))", "np.linalg.inv(eye(0))", "np.linalg.det(eye(0))",
    "np.linalg.slogdet(eye(0)).sign", "np.linalg.slogdet(eye(0)).logabsdet", "np.linalg.cholesky(eye(0))",
]
# Refused as NumPy raises, when the job is checked, naming the array and the expression.
EMPTY_ERRORS = {
    "max(E)": "zero-size array to reduction operation maximum which has no identity",
    "min(E, axis=0)": "zero-size array to reduction operation minimum which has no identity",
    "G[:, 4:].max(1)": "zero-size array to reduction operation maximum which has no identity",
    "nanmax(E)": "zero-size array to reduction operation fmax which has no identity",
    "nanmin(E, axis=0)": "zero-size array to reduction operation fmin which has no identity",
    "argmax(E)": "attempt to get argmax of an empty sequence",
    "argmin(E, axis=0)": "attempt to get argmin of an empty sequence",
    "nanargmax(E, axis=0)": "attempt to get argmax of an empty sequence",
    "np.linalg.norm(E, -np.inf)": "zero-size array to reduction operation minimum which has no identity",
    "np.linalg.norm(E, -2)": "zero-size array to reduction operation minimum which has no identity",
}


def test_empty_arrays_match_numpy(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    for name, a in EMPTY_INPUTS.items():
        np.save(d / f"{name}.npy", a)
    arrays = {n: {"load": str(d / f"{n}.npy"), "block": [2] * a.ndim} for n, a in EMPTY_INPUTS.items()}
    got = run_cases(tmp_path, arrays, EMPTY_CASES, {"url": f"file://{tmp_path / 'store'}"})
    failures = []
    for expr in EMPTY_CASES:
        try:
            want = numpy_answer(expr, EMPTY_INPUTS)
            assert_matches(expr, got[expr], want)
            if want.dtype.kind == "f":
                assert (np.signbit(got[expr]) == np.signbit(want)).all(), f"{expr}: signed zeros differ"
        except AssertionError as e:
            failures.append(f"{expr}: " + " ".join(str(e).split())[:300])
    assert not failures, f"{len(failures)} of {len(EMPTY_CASES)} cases differ from NumPy:\n" + "\n".join(failures)


def test_empty_arrays_are_refused_where_numpy_raises(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    for name, a in EMPTY_INPUTS.items():
        np.save(d / f"{name}.npy", a)
    arrays = {n: {"load": str(d / f"{n}.npy")} for n in EMPTY_INPUTS}
    job = tmp_path / "job.toml"
    for expr, message in EMPTY_ERRORS.items():
        with pytest.raises(ValueError, match=message):
            numpy_answer(expr, EMPTY_INPUTS)
        job.write_text(job_text({**arrays, "y": expr}, {"y": str(tmp_path / "y.npy")},
                                storage={"url": f"file://{tmp_path / 'store'}"}))
        p = subprocess.run([BIN, "check", str(job)], capture_output=True, text=True, timeout=60)
        assert p.returncode == 1 and message in p.stderr and "arrays.y" in p.stderr and expr in p.stderr, \
            (expr, p.stderr)
    # The fits refuse an empty X as scikit-learn does.
    for expr, message in (("linear_regression(E, E[:, 0])", "found X with 0 sample(s)"),
                          ("ridge(G[:, :0], G[:, 0])", "found X with 0 feature(s)")):
        job.write_text(job_text({**arrays, "y": expr}, {"y": str(tmp_path / "y.npy")},
                                storage={"url": f"file://{tmp_path / 'store'}"}))
        p = subprocess.run([BIN, "check", str(job)], capture_output=True, text=True, timeout=60)
        assert p.returncode == 1 and message in p.stderr and "arrays.y" in p.stderr, (expr, p.stderr)


def test_an_empty_array_is_written_read_and_shown_and_a_failed_run_keeps_the_earlier_output(tmp_path):
    """An empty output goes to .npy and to Zarr (as zarr-python reads it); an empty array
    `put` in the store is shown and got as NumPy has it. A run that fails (a mask selecting
    nothing, then max: NumPy's error once the mask is known) leaves the earlier output file
    as it was."""
    d = tmp_path / "in"
    d.mkdir()
    np.save(d / "G.npy", EMPTY_INPUTS["G"])
    storage = {"url": f"file://{tmp_path / 'store'}"}
    job = tmp_path / "job.toml"
    arrays = {"G": {"load": str(d / "G.npy")}, "E": "G[G[:, 0] > 100] * 2", "s": "sum(G[G[:, 0] > 100], axis=0)"}
    outputs = {"E": str(tmp_path / "e.npy"), "z": str(tmp_path / "e.zarr"), "s": str(tmp_path / "s.npy")}
    arrays["z"] = "E"
    job.write_text(job_text(arrays, outputs, name="empty", storage=storage))
    run(job)
    e = np.load(tmp_path / "e.npy")
    assert e.shape == (0, 4) and e.dtype == np.float64
    np.testing.assert_array_equal(np.load(tmp_path / "s.npy"), np.zeros(4))
    import zarr
    z = zarr.open_array(str(tmp_path / "e.zarr"), mode="r")
    assert z.shape == (0, 4) and z[:].shape == (0, 4)
    for a in (e, np.zeros(0, dtype=np.int64)):
        np.save(tmp_path / "put.npy", a)
        name = f"empty/P{a.ndim}"
        for args in (["put", str(tmp_path / "put.npy"), name], ["show", name],
                     ["get", name, str(tmp_path / "got.npy")]):
            p = subprocess.run([BIN, *args, "--storage", storage["url"]], capture_output=True, text=True,
                               timeout=60)
            assert p.returncode == 0, p.stdout + p.stderr
            if args[0] == "show":
                assert repr(a) in p.stdout, p.stdout
        got = np.load(tmp_path / "got.npy")
        assert got.shape == a.shape and got.dtype == a.dtype
    before = (tmp_path / "e.npy").read_bytes()
    job.write_text(job_text({"G": {"load": str(d / "G.npy")}, "E": "max(G[G[:, 0] > 100], axis=0)"},
                            {"E": str(tmp_path / "e.npy")}, name="empty2", storage=storage))
    p = run(job, check=False)
    assert p.returncode == 1, p.stderr
    assert "zero-size array to reduction operation maximum which has no identity" in p.stderr, p.stderr
    assert (tmp_path / "e.npy").read_bytes() == before
    assert not list(tmp_path.glob("*.partial"))
