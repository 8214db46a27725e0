"""A new user's second day with nums-cloud, as a notebook would run it: a CSV with blanks
and a text label column, exploration, a scaled logistic regression with string labels and
balanced class weights (two classes, then three: the multinomial model), model selection,
saving the results. Each step's answer is
checked against pandas, NumPy and scikit-learn on the same data (an AssertionError says
which differs).

    PYTHONPATH=python .venv/bin/python examples/day_two.py [FOLDER]

FOLDER (default: a temporary one) holds the CSV, the session's store and the results."""

import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression as SkLogistic
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler as SkScaler

import nums_cloud
import nums_cloud.numpy as nps
from nums_cloud.models import LogisticRegression
from nums_cloud.preprocessing import StandardScaler


def write_csv(path, n=6_000, seed=43):
    """Six numeric columns of different scales, about 2% of fields blank or "NA", and a
    text label that depends on them."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 6)) * [1.0, 10.0, 0.1, 3.0, 100.0, 1.0] + [0, 5, 0, -2, 50, 0]
    z = x[:, 0] - 0.2 * x[:, 1] + 8 * x[:, 2] + 0.01 * x[:, 4] + rng.normal(size=n)
    label = np.where(z > 0.5, "churned", "stayed")
    text = [[f"{v:.6g}" for v in row] for row in x]
    for i, j in zip(rng.integers(0, n, size=n // 8), rng.integers(0, 6, size=n // 8)):
        text[i][j] = "" if i % 2 else "NA"
    with open(path, "w") as f:
        f.write("age,income,score,tenure,spend,visits,label\n")
        for row, lab in zip(text, label):
            f.write(",".join(row) + f",{lab}\n")


def check(what, ok):
    print(f"{'ok ' if ok else 'DIFFERS'} {what}")
    assert ok, what


def main(folder):
    folder = Path(folder)
    csv = folder / "customers.csv"
    write_csv(csv)
    nums_cloud.init(storage=str(folder / "store"), progress=False)
    cols = ["age", "income", "score", "tenure", "spend", "visits"]

    # 1. Read: numeric columns by name (blanks and NA are NaN, as pandas reads them); the
    # text labels with pandas, since nums-cloud arrays hold numbers.
    X = nps.read_csv(csv, header=0, usecols=cols)
    df = pd.read_csv(csv)
    want = df[cols].to_numpy()
    check("read_csv equals pandas (NaN where blank or NA)",
          X.shape == want.shape and np.array_equal(X.get(), want, equal_nan=True))
    y = df["label"].to_numpy()

    # 2. Explore.
    check("missing values per column", np.array_equal(nps.isnan(X).sum(axis=0).get(),
                                                      df[cols].isna().sum().to_numpy()))
    check("nanmean per column", np.allclose(nps.nanmean(X, axis=0).get(), df[cols].mean().to_numpy(),
                                            rtol=1e-12))
    check("nanmedian per column", np.allclose(nps.nanmedian(X, axis=0).get(),
                                              df[cols].median().to_numpy(), rtol=1e-12))
    Xf = nps.where(nps.isnan(X), nps.nanmean(X, axis=0), X)  # mean imputation, lazy
    xf = np.where(np.isnan(want), np.nanmean(want, axis=0), want)
    check("imputed data", np.allclose(Xf.get(), xf, rtol=1e-12))
    counts, edges = nps.histogram(Xf[:, 1], bins=20)
    wc, we = np.histogram(xf[:, 1], bins=20)
    check("histogram of income", np.array_equal(counts.get(), wc) and np.allclose(edges.get(), we))
    check("corrcoef", np.allclose(nps.corrcoef(Xf, rowvar=False).get(), np.corrcoef(xf, rowvar=False),
                                  rtol=1e-10, atol=1e-12))
    check("percentiles", np.allclose(nps.percentile(Xf, [5, 50, 95], axis=0).get(),
                                     np.percentile(xf, [5, 50, 95], axis=0), rtol=1e-12))
    check("digitize into age bands", np.array_equal(nps.digitize(Xf[:, 0], [-1.0, 0.0, 1.0]).get(),
                                                    np.digitize(xf[:, 0], [-1.0, 0.0, 1.0])))

    # 3. A fit: scaled features, string labels, balanced class weights.
    scaler = StandardScaler().fit(Xf)
    Xs = scaler.transform(Xf)
    sk_scaler = SkScaler().fit(xf)
    check("StandardScaler", np.allclose(Xs.get(), sk_scaler.transform(xf), rtol=1e-10, atol=1e-12))
    # A tight tol: both solvers then stop at the one minimum (at the default 1e-4 each
    # stops where its own steps meet it, which differ in the third digit).
    model = LogisticRegression(C=0.5, class_weight="balanced", tol=1e-8).fit(Xs, y)
    sk = SkLogistic(C=0.5, class_weight="balanced", tol=1e-8).fit(sk_scaler.transform(xf), y)
    check("classes_ are the labels", list(model.classes_) == list(sk.classes_))
    check("coefficients equal scikit-learn's",
          np.allclose(model.coef_, sk.coef_, rtol=1e-5, atol=1e-6)
          and np.allclose(model.intercept_, sk.intercept_, rtol=1e-5, atol=1e-6))
    pred = model.predict(Xs)
    pred = pred.get() if hasattr(pred, "get") else pred
    check("predictions are labels, as scikit-learn's",
          pred.dtype == sk.predict(sk_scaler.transform(xf)).dtype
          and np.mean(pred == sk.predict(sk_scaler.transform(xf))) > 0.999)

    # A third class: scikit-learn's multinomial model, string labels, balanced weights.
    noise = np.random.default_rng(7).normal(size=len(xf))
    score = xf[:, 0] + 5 * xf[:, 2] + noise
    y3 = np.where(score > 0.7, "high", np.where(score > -0.7, "mid", "low"))
    m3 = LogisticRegression(C=0.5, class_weight="balanced", tol=1e-8).fit(Xs, y3)
    sk3 = SkLogistic(C=0.5, class_weight="balanced", tol=1e-8).fit(sk_scaler.transform(xf), y3)
    p3 = m3.predict_proba(Xs)
    p3 = p3.get() if hasattr(p3, "get") else p3
    check("three classes: scikit-learn's multinomial probabilities",
          list(m3.classes_) == list(sk3.classes_) and m3.coef_.shape == (3, 6)
          and np.allclose(p3, sk3.predict_proba(sk_scaler.transform(xf)), rtol=1e-5, atol=1e-6))

    # 4. Model selection, scikit-learn's tools over nums-cloud's estimators.
    xs = sk_scaler.transform(xf)
    ours = cross_val_score(LogisticRegression(class_weight="balanced"), xs, y, cv=3)
    theirs = cross_val_score(SkLogistic(class_weight="balanced"), xs, y, cv=3)
    check("cross_val_score", np.allclose(ours, theirs, atol=2e-3))
    grid = GridSearchCV(make_pipeline(StandardScaler(), LogisticRegression()),
                        {"logisticregression__C": [0.01, 1.0]}, cv=3).fit(xf, y)
    sk_grid = GridSearchCV(make_pipeline(SkScaler(), SkLogistic()),
                           {"logisticregression__C": [0.01, 1.0]}, cv=3).fit(xf, y)
    check("GridSearchCV picks scikit-learn's C", grid.best_params_ == sk_grid.best_params_)

    # 5. Save: the data as read (its columns keep the CSV's names), the imputed data and
    # its scores side by side (computed columns are c0, c1, ...), the scores alone.
    proba = model.predict_proba(Xs)[:, 1]
    nps.save(folder / "raw.parquet", X)
    nps.save(folder / "scored.parquet", nps.column_stack((Xf, proba)))
    nps.save(folder / "proba.npy", proba)
    raw = pd.read_parquet(folder / "raw.parquet")
    check("Parquet columns named as read", list(raw.columns) == cols
          and np.array_equal(raw.to_numpy(), want, equal_nan=True))
    scored = pd.read_parquet(folder / "scored.parquet")
    want_proba = sk.predict_proba(xs)[:, 1]
    check("saved scores", list(scored.columns) == [f"c{i}" for i in range(7)]
          and np.allclose(scored.to_numpy()[:, :6], xf, rtol=0)
          and np.allclose(np.load(folder / "proba.npy"), want_proba, atol=1e-6)
          and np.allclose(scored["c6"].to_numpy(), want_proba, atol=1e-6))
    nums_cloud.close()
    print("day two: every step equals pandas, NumPy and scikit-learn")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(sys.argv[1])
    else:
        with tempfile.TemporaryDirectory() as d:
            main(d)
