//! The library API (`nums_cloud::api`) used from async code, as a program would: computes
//! awaited under a multi-thread runtime, blocking forms inside runtimes, typed errors
//! matched as soon as an operation is made, a bad operation that does not poison the
//! session, arrays computed once and read in place after, compute_many and from_ndarray
//! checked against known values, settings that are values, and no job text or `.npy`
//! file on the way. Runs the real engine with the local backend (function processes of
//! the `nums-cloud` binary) on a file store.

use std::path::{Path, PathBuf};

use ndarray::{Array2, array};
use nums_cloud::api::{Arg, Array, Session};
use nums_cloud::dispatch::InvokeError;
use nums_cloud::{Block, DType, Error};

/// A store folder of its own for each test, removed at the end.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("nums-api-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }

    /// A session whose computes all run on function processes (as these tests were
    /// written for them; `in_process_bytes` 0), of the `nums-cloud` binary.
    fn session(&self) -> Session {
        Session::new(&format!("file://{}", self.0.join("store").display()))
            .unwrap()
            .function_binary(env!("CARGO_BIN_EXE_nums-cloud"))
            .in_process_bytes(0)
    }

    /// Files under the store folder (relative paths), sorted.
    fn stored(&self) -> Vec<String> {
        fn walk(root: &Path, d: &Path, out: &mut Vec<String>) {
            for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(root, &p, out);
                } else {
                    out.push(p.strip_prefix(root).unwrap().display().to_string());
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.0.join("store"), &self.0.join("store"), &mut out);
        out.sort();
        out
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn f64s(b: &Block) -> Vec<f64> {
    b.to_f64().iter().copied().collect()
}

#[test]
fn api_types_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Session>();
    send_sync::<Array>();
    send_sync::<Error>();
}

#[tokio::test(flavor = "multi_thread")]
async fn compute_awaits_in_async_code_and_errors_are_typed_at_once() {
    let d = Dir::new("async");
    let s = d.session();
    let x = s
        .arange(12.0)
        .reshape(&[4, 3])
        .block(&[3, 2])
        .named("X")
        .unwrap();
    let w = s.from_ndarray(array![1.0, 2.0, 3.0]).named("w").unwrap();
    let y = x.matmul(&w);
    assert_eq!(y.shape().unwrap(), vec![4]);
    assert_eq!(
        y.compute::<f64>()
            .await
            .unwrap()
            .into_raw_vec_and_offset()
            .0,
        vec![8.0, 26.0, 44.0, 62.0]
    );

    // Shapes that do not broadcast: the operation's error, before anything runs, naming
    // the arrays as the program named them.
    let bad = &x + &s.ones(&[4]);
    let e = bad.check().unwrap_err();
    let Error::Job { array, message, .. } = &e else {
        panic!("expected a job error, got {e:?}")
    };
    assert_eq!(array.as_deref(), Some("X + ones([4])"));
    assert!(message.starts_with("`X + ones([4])`: "), "{message}");
    assert!(message.contains("(4, 3) and (4,)"), "{message}");
    // Computing it, or anything made from it, gives the same error.
    assert_eq!(
        bad.compute::<f64>().await.unwrap_err().to_string(),
        e.to_string()
    );
    assert_eq!((&bad * 2.0).check().unwrap_err().to_string(), e.to_string());

    // The session is not poisoned: arrays defined before and after still compute.
    let after = (&x * 2.0).sum(None);
    assert_eq!(after.compute::<f64>().await.unwrap().sum(), 132.0);
    assert_eq!(y.sum(None).compute::<f64>().await.unwrap().sum(), 140.0);

    // Every function of the table by name; an unknown one is named.
    let v = s
        .call(
            "var",
            &[(&x).into()],
            &[("axis", 0.into()), ("ddof", 1.into())],
        )
        .unwrap()
        .array()
        .unwrap();
    assert_eq!(v.label(), "var(X, axis=0, ddof=1)");
    assert_eq!(
        v.compute::<f64>()
            .await
            .unwrap()
            .into_raw_vec_and_offset()
            .0,
        vec![15.0; 3]
    );
    let e = s.call("sine", &[(&x).into()], &[]).unwrap_err();
    assert!(matches!(e, Error::Job { .. }), "{e:?}");
    assert!(
        e.to_string().contains("sine") && e.to_string().contains("sin()"),
        "{e}"
    );

    // Indexing: slices, integers, ndarray's s![], NumPy's negative indices.
    let last = x.index(&[Arg::Slice(None, None, None), Arg::Int(-1)]);
    assert_eq!(
        last.compute::<f64>()
            .await
            .unwrap()
            .into_raw_vec_and_offset()
            .0,
        vec![2.0, 5.0, 8.0, 11.0]
    );
    let rows = x.slice(ndarray::s![1..3, ..]);
    assert_eq!(rows.shape().unwrap(), vec![2, 3]);

    // Two computes at once from spawned tasks (the futures are Send).
    let (a, b) = (x.max(None), x.min(None));
    let ta = tokio::spawn(async move { a.compute::<f64>().await });
    let tb = tokio::spawn(async move { b.compute::<f64>().await });
    assert_eq!(ta.await.unwrap().unwrap().sum(), 11.0);
    assert_eq!(tb.await.unwrap().unwrap().sum(), 0.0);

    // A dtype that is not the array's is refused, naming both.
    let e = x.gt(5.0).compute::<f64>().await.unwrap_err();
    assert!(e.to_string().contains("is bool, not float64"), "{e}");
    s.close().await.unwrap();
    assert!(d.stored().is_empty(), "{:?}", d.stored());
}

#[tokio::test(flavor = "multi_thread")]
async fn blocking_forms_work_inside_a_multi_thread_runtime() {
    let d = Dir::new("blocking-mt");
    let s = d.session();
    let v = s.ones(&[3, 3]).sum(None).compute_blocking::<f64>().unwrap();
    assert_eq!(v.sum(), 9.0);
    assert_eq!(s.zeros(&[2, 5]).shape().unwrap(), vec![2, 5]);
}

#[tokio::test]
async fn blocking_forms_work_inside_a_current_thread_runtime() {
    let d = Dir::new("blocking-ct");
    let s = d.session();
    let v = s.arange(5.0).sum(None).compute_blocking::<f64>().unwrap();
    assert_eq!(v.sum(), 10.0);
    // And the async form, awaited on this runtime.
    let v = s.arange(5.0).max(None).compute::<f64>().await.unwrap();
    assert_eq!(v.sum(), 4.0);
}

#[tokio::test(flavor = "multi_thread")]
async fn operators_take_every_owned_and_borrowed_pair_and_non_finite_scalars() {
    let d = Dir::new("ops");
    let s = d.session();
    let a = s.from_ndarray(array![1.0, 2.0, 4.0]);
    let b = s.from_ndarray(array![2.0, 2.0, 2.0]);
    let all = [
        &a + &b,
        a.clone() - &b,
        &a * b.clone(),
        a.clone() / b.clone(),
        &a % 3.0,
        a.clone() + 1.0,
        10.0 - &a,
        2.0 * a.clone(),
        -&a,
        -a.clone(),
        a.pow(2.0),
        a.maximum(&b),
        a.minimum(f64::NEG_INFINITY),
        &a * f64::NAN,
        f64::INFINITY + &a,
        s.full(&[3], f64::NAN),
        a.gt(&b).astype(DType::Float64),
        a.le(2.0).astype(DType::Float64),
        a.equal(2.0).astype(DType::Float64),
        (!a.gt(&b)).astype(DType::Float64),
        (a.gt(1.0) & b.gt(1.0)).astype(DType::Float64),
    ];
    let refs: Vec<&Array> = all.iter().collect();
    let got: Vec<Vec<f64>> = s
        .compute_many(&refs)
        .await
        .unwrap()
        .iter()
        .map(f64s)
        .collect();
    let inf = f64::INFINITY;
    let want = [
        vec![3.0, 4.0, 6.0],
        vec![-1.0, 0.0, 2.0],
        vec![2.0, 4.0, 8.0],
        vec![0.5, 1.0, 2.0],
        vec![1.0, 2.0, 1.0],
        vec![2.0, 3.0, 5.0],
        vec![9.0, 8.0, 6.0],
        vec![2.0, 4.0, 8.0],
        vec![-1.0, -2.0, -4.0],
        vec![-1.0, -2.0, -4.0],
        vec![1.0, 4.0, 16.0],
        vec![2.0, 2.0, 4.0],
        vec![-inf, -inf, -inf],
        vec![f64::NAN; 3],
        vec![inf; 3],
        vec![f64::NAN; 3],
        vec![0.0, 0.0, 1.0],
        vec![1.0, 1.0, 0.0],
        vec![0.0, 1.0, 0.0],
        vec![1.0, 1.0, 0.0],
        vec![0.0, 1.0, 1.0],
    ];
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let same = g
            .iter()
            .zip(w)
            .all(|(g, w)| g == w || (g.is_nan() && w.is_nan()));
        assert!(same, "{}: got {g:?}, want {w:?}", all[i].label());
    }
    assert_eq!(a.gt(&b).dtype().unwrap(), DType::Bool);
}

/// Every file under `dir` whose name ends in one of `suffixes`.
fn files_ending(dir: &Path, suffixes: &[&str]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if suffixes.iter().any(|s| p.to_string_lossy().ends_with(s)) {
                out.push(p);
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn from_ndarray_is_written_once_and_values_come_back_in_memory() {
    let d = Dir::new("ndarray");
    let s = d.session().workers(2);
    // 1000 x 200 float64 (1.6 MB): split into row blocks over the 2 workers.
    let m = Array2::from_shape_fn((1000, 200), |(i, j)| ((i * 7 + j * 3) % 11) as f64 - 5.0);
    let ints = array![[1i64, -2], [3, 4]];
    let flags = array![true, false, true];
    let before = files_ending(&std::env::temp_dir(), &[".npy", ".toml"]);
    let x = s.from_ndarray(&m).named("M").unwrap();
    assert_eq!(x.blocks().unwrap(), vec![500, 200]);
    let col_sums = x.sum(Some(&[0]));
    let got = col_sums.compute::<f64>().await.unwrap();
    assert_eq!(got, m.sum_axis(ndarray::Axis(0)).into_dyn());
    let inputs: Vec<_> = d
        .stored()
        .into_iter()
        .filter(|k| k.contains("/in/") && k.contains("/c/"))
        .collect();
    assert_eq!(inputs.len(), 2, "two row blocks: {:?}", d.stored());
    // Read in place by the next compute too: the same blocks, not written again.
    let times = |ks: &[String]| -> Vec<std::time::SystemTime> {
        ks.iter()
            .map(|k| {
                std::fs::metadata(d.0.join("store").join(k))
                    .unwrap()
                    .modified()
                    .unwrap()
            })
            .collect()
    };
    let t0 = times(&inputs);
    let gram = x.t().matmul(&x).compute::<f64>().await.unwrap();
    assert_eq!(gram, m.t().dot(&m).into_dyn());
    assert_eq!(times(&inputs), t0);

    let i = s.from_ndarray(ints.clone());
    assert_eq!(i.dtype().unwrap(), DType::Int64);
    let got = (&i * 2.0).compute::<f64>().await.unwrap(); // int64 * float: float64
    assert_eq!(got, array![[2.0, -4.0], [6.0, 8.0]].into_dyn());
    let got = s
        .from_ndarray(flags)
        .sum(None)
        .compute::<i64>()
        .await
        .unwrap();
    assert_eq!(got, ndarray::arr0(2).into_dyn());
    // No job file and no .npy file was written on the way (values in and out in memory).
    let after = files_ending(&std::env::temp_dir(), &[".npy", ".toml"]);
    // (Other programs may write to the temporary folder meanwhile: only what a session or
    // this process's functions would name is looked at.)
    let ours = |p: &&PathBuf| {
        let p = p.to_string_lossy();
        p.contains("api-") || p.contains(&format!("nums-cloud-{}", std::process::id()))
    };
    let new: Vec<_> = after
        .iter()
        .filter(|p| !before.contains(p))
        .filter(ours)
        .collect();
    assert!(new.is_empty(), "{new:?}");
    assert!(files_ending(&d.0, &[".npy", ".toml"]).is_empty());
    drop((x, i, col_sums));
    drop(s);
    // The last handle gone, what the session stored is gone too.
    assert!(d.stored().is_empty(), "{:?}", d.stored());
}

#[tokio::test(flavor = "multi_thread")]
async fn arrays_of_every_dtype_come_and_go_in_their_dtype() {
    use nums_cloud::api::Arg;
    use nums_layout::C64;
    let d = Dir::new("dtypes");
    let s = d.session();
    let z = array![C64::new(1.0, 2.0), C64::new(-0.5, 0.25)];
    let x = s.from_ndarray(&z);
    assert_eq!(x.dtype().unwrap(), DType::Complex64);
    // |z|^2 through the conjugate (complex64), and the real and imaginary parts (float32).
    let sq = (&x * &x.conj()).compute::<C64>().await.unwrap();
    assert_eq!(
        sq,
        array![C64::new(5.0, 0.0), C64::new(0.3125, 0.0)].into_dyn()
    );
    let re = x.real().compute::<f32>().await.unwrap();
    assert_eq!(re, array![1.0f32, -0.5].into_dyn());
    assert_eq!(
        x.imag().compute_any().await.unwrap(),
        Block::F32(array![2.0f32, 0.25].into_dyn())
    );
    // uint8 wraps as NumPy's (250 + 250 // 25 is 4), and keeps its dtype.
    let u = s.from_ndarray(array![250u8, 7]);
    let tenth = s
        .call("floor_divide", &[(&u).into(), Arg::Int(25)], &[])
        .unwrap()
        .array()
        .unwrap();
    let got = s
        .call("add", &[(&u).into(), (&tenth).into()], &[])
        .unwrap()
        .array()
        .unwrap();
    assert_eq!(
        got.compute::<u8>().await.unwrap(),
        array![4u8, 7].into_dyn()
    );
    // A NumPy scalar argument of an elementwise function promotes as its dtype (NEP 50),
    // as it does beside an operator: uint8 + int64(1) is int64.
    let one = Arg::NumPy(nums_layout::Scalar::Int(1), DType::Int64);
    for got in [
        s.call("add", &[(&u).into(), one.clone()], &[]),
        s.call("add", &[one.clone(), (&u).into()], &[]),
    ] {
        let got = got.unwrap().array().unwrap();
        assert_eq!(got.dtype().unwrap(), DType::Int64);
        assert_eq!(
            got.compute::<i64>().await.unwrap(),
            array![251i64, 8].into_dyn()
        );
    }
    assert_eq!(u.op("+", one).dtype().unwrap(), DType::Int64);
    let i = s.from_ndarray(array![-128i8, 5]).astype(DType::Int16);
    assert_eq!(
        i.abs().compute::<i16>().await.unwrap(),
        array![128i16, 5].into_dyn()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn bitwise_operators_and_the_new_functions_answer_as_numpy() {
    use nums_cloud::api::Arg;
    let d = Dir::new("bitwise");
    let s = d.session();
    let a = s.from_ndarray(array![[1i32, -8], [6, 3]]);
    let b = s.from_ndarray(array![[3i32, 1], [33, 2]]);
    let ints = |x: Array| async move { x.compute::<i32>().await.unwrap() };
    // NumPy's: shifts past the width give 0 (or -1 for a negative number shifted right).
    assert_eq!(ints(&a & &b).await, array![[1, 0], [0, 2]].into_dyn());
    assert_eq!(ints(&a << &b).await, array![[8, -16], [0, 12]].into_dyn());
    assert_eq!(ints(&a >> &b).await, array![[0, -4], [0, 0]].into_dyn());
    assert_eq!(ints(!&a).await, array![[-2, 7], [-7, -4]].into_dyn());
    let flipped = s
        .call("flip", &[(&a).into()], &[("axis", Arg::Int(1))])
        .unwrap()
        .array()
        .unwrap();
    assert_eq!(ints(flipped).await, array![[-8, 1], [3, 6]].into_dyn());
    // Halves to even.
    let x = s.from_ndarray(array![0.5f64, 1.5, 2.5, -2.675]);
    let r = s
        .call("round", &[(&x).into()], &[])
        .unwrap()
        .array()
        .unwrap();
    assert_eq!(
        r.compute::<f64>().await.unwrap(),
        array![0.0, 2.0, 2.0, -3.0].into_dyn()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_computed_array_is_read_in_place_by_later_computes() {
    let d = Dir::new("persist");
    let s = d.session();
    // An input file that the computed array is made from.
    let input = d.0.join("x.npy");
    let xv = Array2::from_shape_fn((50, 4), |(i, j)| (i + 10 * j) as f64);
    ndarray_npy::write_npy(&input, &xv).unwrap();
    let x = s
        .load(input.to_str().unwrap())
        .await
        .unwrap()
        .named("X")
        .unwrap();
    assert_eq!(
        (x.shape().unwrap(), x.dtype().unwrap()),
        (vec![50, 4], DType::Float64)
    );
    let y = (&x * 2.0 + 1.0).named("Y").unwrap();
    assert!(!y.computed());
    s.persist(&y).await.unwrap();
    assert!(y.computed());
    let kept = d.stored();
    s.persist(&y).await.unwrap(); // twice: nothing more
    assert_eq!(d.stored(), kept);
    // The input file is gone: Y is read in place.
    std::fs::remove_file(&input).unwrap();
    let got = y.sum(Some(&[0])).compute::<f64>().await.unwrap();
    let want = (&xv * 2.0 + 1.0).sum_axis(ndarray::Axis(0)).into_dyn();
    assert_eq!(got, want);
    // X was imported by Y's compute and kept: read in place too, not from the file.
    let x3 = (&x * 3.0).compute::<f64>().await.unwrap();
    assert_eq!(x3, (&xv * 3.0).into_dyn());

    // The kept blocks removed behind the session's back: a data error naming the block
    // and the array, not a wrong answer.
    for chunk in d
        .stored()
        .into_iter()
        .filter(|k| k.contains("/out/") && k.contains("/c/"))
    {
        std::fs::remove_file(d.0.join("store").join(&chunk)).unwrap();
    }
    let e = (&y + 0.0).compute::<f64>().await.unwrap_err();
    assert!(matches!(e, Error::Data { .. }), "{e:?}");
    assert!(e.to_string().contains("of `Y`"), "{e}");

    s.close().await.unwrap();
    assert!(d.stored().is_empty(), "{:?}", d.stored());
    let e = y.compute::<f64>().await.unwrap_err();
    assert!(
        matches!(e, Error::Config { ref setting, .. } if setting == "close"),
        "{e:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn compute_many_plans_several_arrays_at_once() {
    let d = Dir::new("many");
    let s = d.session();
    let x = s
        .random_normal(&[3000, 6], 11)
        .block(&[1000, 6])
        .named("X")
        .unwrap();
    let mean = x.mean(Some(&[0]));
    let sq = (&x * &x).mean(Some(&[0]));
    let n = x.gt(0.0).sum(None);
    let v = s.compute_many(&[&mean, &sq, &n, &mean]).await.unwrap();
    assert_eq!(v.len(), 4);
    assert_eq!(v[0], v[3]);
    // The same values when computed again (read in place) and from a fresh session.
    assert_eq!(v[0], mean.compute_any().await.unwrap());
    let t = d.session();
    // (Planned alone, its partial sums may group otherwise: equal to the last bits.)
    let fresh = (&t.random_normal(&[3000, 6], 11) * 1.0).mean(Some(&[0]));
    let fresh = f64s(&fresh.compute_any().await.unwrap());
    for (a, b) in f64s(&v[0]).iter().zip(&fresh) {
        assert!((a - b).abs() <= 1e-15, "{a} {b}");
    }
    // Normal(0, 1): means near 0, mean squares near 1, about half positive.
    assert!(f64s(&v[0]).iter().all(|m| m.abs() < 0.1), "{:?}", v[0]);
    assert!(
        f64s(&v[1]).iter().all(|m| (m - 1.0).abs() < 0.1),
        "{:?}",
        v[1]
    );
    let Block::I64(n) = &v[2] else {
        panic!("{:?}", v[2])
    };
    assert!((8000..10000).contains(&n.sum()), "{n}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_input_from_memory_asked_for_beside_a_computed_array_is_written() {
    // An input from memory that a compute asks for itself, beside an array it computes
    // from another input: it is written too (a fit of X and y.astype(float) asks so).
    let d = Dir::new("pending");
    let s = d.session();
    let x = s.from_ndarray(array![[1.0, 2.0], [3.0, 4.0]]);
    let y = s.from_ndarray(array![1i64, 0]).astype(DType::Float64);
    let v = s.compute_many(&[&x, &y]).await.unwrap();
    assert_eq!(f64s(&v[0]), vec![1.0, 2.0, 3.0, 4.0]);
    assert_eq!(f64s(&v[1]), vec![1.0, 0.0]);
    let fit = nums_cloud::api::models::Ridge::new()
        .alpha(0.0)
        .fit_intercept(false)
        .fit(
            &s.from_ndarray(array![[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]),
            &s.from_ndarray(array![1i64, 2, 3]).astype(DType::Float64),
        )
        .await
        .unwrap();
    assert!(
        (fit.coef[0] - 1.0).abs() < 1e-9 && (fit.coef[1] - 2.0).abs() < 1e-9,
        "{fit:?}"
    );
}

/// The estimators' `sample_weight`: weight 2 counts a row twice, weight 0 leaves it out,
/// as scikit-learn's; negative weights are refused in its words.
#[tokio::test(flavor = "multi_thread")]
async fn sample_weights_are_repeated_rows() {
    use nums_cloud::api::models::{LogisticRegression, Ridge, Solver};
    let d = Dir::new("weights");
    let s = d.session();
    let x = array![
        [1.0, 0.5],
        [0.0, 1.0],
        [1.0, 1.0],
        [2.0, -1.0],
        [0.5, 0.5],
        [-1.0, 2.0]
    ];
    let y = array![1.0, 0.0, 1.0, 1.0, 0.0, 0.0];
    let w = array![2.0, 1.0, 0.0, 1.0, 2.0, 1.0];
    let rows = [0usize, 0, 1, 3, 4, 4, 5];
    let xr = x.select(ndarray::Axis(0), &rows);
    let yr = y.select(ndarray::Axis(0), &rows);
    let (xa, ya, wa) = (s.from_ndarray(x), s.from_ndarray(y), s.from_ndarray(w));
    let (xra, yra) = (s.from_ndarray(xr), s.from_ndarray(yr));
    let near = |a: &[f64], b: &[f64]| a.iter().zip(b).all(|(u, v)| (u - v).abs() < 1e-8);
    let weighted = Ridge::new().sample_weight(&wa).fit(&xa, &ya).await.unwrap();
    let repeated = Ridge::new().fit(&xra, &yra).await.unwrap();
    assert!(
        near(&weighted.coef, &repeated.coef),
        "{weighted:?} {repeated:?}"
    );
    assert!((weighted.intercept - repeated.intercept).abs() < 1e-8);
    let lr = LogisticRegression::new().solver(Solver::Newton).tol(1e-10);
    let weighted = lr.clone().sample_weight(&wa).fit(&xa, &ya).await.unwrap();
    let repeated = lr.fit(&xra, &yra).await.unwrap();
    assert!(
        near(&weighted.coef, &repeated.coef),
        "{weighted:?} {repeated:?}"
    );
    let negative = s.from_ndarray(array![1.0, 1.0, -1.0, 1.0, 1.0, 1.0]);
    let e = Ridge::new()
        .sample_weight(&negative)
        .fit(&xa, &ya)
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("Negative values in data passed to `sample_weight`."),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn small_computes_run_in_this_process_with_the_same_values() {
    let d = Dir::new("in-process");
    let here = d
        .session()
        .in_process_bytes(nums_cloud::api::IN_PROCESS_BYTES);
    let there = d.session();
    let mut values = Vec::new();
    for s in [&here, &there] {
        let x = s
            .random_normal(&[300, 4], 5)
            .block(&[70, 3])
            .named("X")
            .unwrap();
        let y = (x.t().matmul(&x) * 0.5).sum(Some(&[0]));
        let e = s.explain(&[&y]).unwrap();
        values.push(y.compute::<f64>().await.unwrap());
        let c = s.counts();
        assert!(c.invocations > 0 && c.tasks >= c.invocations, "{c:?}");
        if std::ptr::eq(s, &here) {
            assert_eq!(e.place, nums_cloud::api::Place::InProcess, "{e}");
            assert_eq!(c.in_process, c.invocations, "{c:?}");
        } else {
            assert_eq!(
                e.place,
                nums_cloud::api::Place::Backend(nums_cloud::api::Backend::Local),
                "{e}"
            );
            assert_eq!(c.in_process, 0, "{c:?}");
        }
        assert_eq!(
            s.explain(&[&y]).unwrap().place,
            nums_cloud::api::Place::Stored
        );
    }
    // The same plan and kernels: the same bits.
    assert_eq!(values[0], values[1]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_computed_array_leaves_the_store_with_its_last_handle() {
    // As Dask's persisted arrays: a computed array's blocks stay while a handle to it
    // lives; the next compute after its last handle is dropped deletes them (beside its
    // own work), and a lazy array made from it computes it again from its operation.
    // (On the function processes: what they make goes to the store, where this test sees
    // it; a compute in this process keeps its blocks in the process-wide memory tier,
    // which the other tests of this binary turn on and off.)
    let d = Dir::new("release");
    let s = d.session().in_process_bytes(0);
    let m = Array2::from_shape_fn((300, 40), |(i, j)| ((i * 7 + j * 3) % 11) as f64 - 5.0);
    let x = s.from_ndarray(&m).named("X").unwrap();
    let kept = (&x + 1.0).named("kept").unwrap();
    assert_eq!(kept.compute::<f64>().await.unwrap(), (&m + 1.0).into_dyn());
    let before = d.stored();
    let y = (&x * 2.0).named("Y").unwrap();
    assert_eq!(y.compute::<f64>().await.unwrap(), (&m * 2.0).into_dyn());
    let with_y = d.stored();
    assert!(with_y.len() > before.len(), "{with_y:?}");
    let z = y.sum(Some(&[0])); // lazy, made from Y before Y goes
    let r = s.random_normal(&[50, 3], 9).named("R").unwrap();
    let r_values = r.compute::<f64>().await.unwrap();
    let r2 = &r * 1.0; // lazy, made from R before R goes
    let with_r = d.stored();
    let y2 = y.clone();
    drop(y); // its clone holds it still
    let once = s.counts();
    assert_eq!(kept.compute::<f64>().await.unwrap(), (&m + 1.0).into_dyn());
    s.collect().await;
    assert_eq!(d.stored(), with_r, "Y is held by its clone");
    drop((y2, r));
    // The next compute deletes Y's and R's blocks; `kept` is read, not computed again.
    assert_eq!(kept.compute::<f64>().await.unwrap(), (&m + 1.0).into_dyn());
    assert_eq!(s.counts(), once, "kept read in place");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while d.stored() != before && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert_eq!(d.stored(), before, "Y's and R's blocks are gone");
    // Made from Y before it went: Y computed again from X (in the store still: `kept`
    // and `z` are made from it).
    drop(x);
    let want = (&m * 2.0).sum_axis(ndarray::Axis(0)).into_dyn();
    assert_eq!(z.compute::<f64>().await.unwrap(), want);
    assert!(s.counts().tasks > once.tasks);
    // The same random values: the engine is deterministic.
    assert_eq!(r2.compute::<f64>().await.unwrap(), r_values);
    // An import, and the input from memory, go when nothing can read them any more.
    let file = d.0.join("l.npy");
    ndarray_npy::write_npy(&file, &m).unwrap();
    let l = s.load(file.to_str().unwrap()).await.unwrap();
    let l1 = &l - 1.0;
    assert_eq!(l1.compute::<f64>().await.unwrap(), (&m - 1.0).into_dyn());
    drop((l, l1, z, r2, kept));
    s.collect().await;
    // Only the session's claim on its prefix is left while it lives.
    let left: Vec<String> = d
        .stored()
        .into_iter()
        .filter(|k| !k.ends_with("/session.json"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    s.close().await.unwrap();
    assert!(d.stored().is_empty(), "{:?}", d.stored());
}

#[test]
fn settings_are_values_of_each_session() {
    let d = Dir::new("settings");
    let s = d.session();
    let t = s.clone().workers(8).memory_mb(512);
    assert_eq!((s.settings().workers, s.settings().memory_mb), (2, 2048));
    assert_eq!((t.settings().workers, t.settings().memory_mb), (8, 512));
    // Default blocks follow the settings of the session an array is made from.
    // (An array under 1 MiB is one block; 8 MB spreads over the workers.)
    assert_eq!(s.zeros(&[1_000_000]).blocks().unwrap(), vec![500_000]);
    assert_eq!(t.zeros(&[1_000_000]).blocks().unwrap(), vec![125_000]);
}

#[tokio::test(flavor = "multi_thread")]
async fn settings_plan_store_and_dispatch_errors_are_typed() {
    let d = Dir::new("errors");
    // A plan that cannot fit memory_mb: the array and the memory it needs.
    let s = d.session().memory_mb(128);
    let big = s
        .zeros(&[40_000_000])
        .block(&[40_000_000])
        .named("Big")
        .unwrap();
    let e = (&big + 1.0).compute::<f64>().await.unwrap_err();
    let Error::Plan {
        array,
        need_mib,
        memory_mb,
        message,
    } = &e
    else {
        panic!("expected a plan error, got {e:?}")
    };
    assert_eq!(*memory_mb, 128);
    assert!(*need_mib > 128, "{e}");
    assert!(array.is_some(), "{e}");
    assert!(message.contains("memory_mb"), "{message}");
    assert!(
        !message.contains(".toml") && !message.contains(".api"),
        "{message}"
    );

    // Settings out of range name the setting.
    let e = d
        .session()
        .workers(0)
        .ones(&[2])
        .compute::<f64>()
        .await
        .unwrap_err();
    assert!(
        matches!(e, Error::Config { ref setting, .. } if setting == "workers"),
        "{e:?}"
    );
    // The engine's limit, in the words a job file's `[compute]` gets.
    assert!(
        e.to_string()
            .contains("0 is out of range: it must be between 1 and 1000"),
        "{e}"
    );
    let e = d
        .session()
        .timeout_seconds(901)
        .ones(&[2])
        .compute::<f64>()
        .await
        .unwrap_err();
    assert!(
        matches!(e, Error::Config { ref setting, .. } if setting == "timeout_seconds"),
        "{e:?}"
    );

    // A store that does not take writes.
    let s = Session::new("file:///proc/nums-api-test").unwrap();
    let e = (s.ones(&[2]) * 2.0).compute::<f64>().await.unwrap_err();
    assert!(matches!(e, Error::Store { .. }), "{e:?}");

    // Function processes that fail every invocation: a dispatch error, after retries.
    let s = d.session().function_binary("/bin/false");
    let e = s.ones(&[2]).sum(None).compute::<f64>().await.unwrap_err();
    let Error::Dispatch {
        error, attempts, ..
    } = &e
    else {
        panic!("expected a dispatch error, got {e:?}")
    };
    assert!(matches!(error, InvokeError::Function { .. }), "{error:?}");
    assert!(*attempts >= 1, "{e}");
}

#[test]
fn sessions_do_not_mix() {
    let (a, b) = (Dir::new("mix-a"), Dir::new("mix-b"));
    let (s, t) = (a.session(), b.session());
    let x = s.ones(&[2]);
    let y = t.ones(&[2]);
    let e = (&x + &y).check().unwrap_err();
    assert!(matches!(e, Error::Job { .. }), "{e:?}");
    assert!(
        e.to_string().contains("belong to different sessions"),
        "{e}"
    );
    let e = s.compute_many_blocking(&[&y]).unwrap_err();
    assert!(e.to_string().contains("another session"), "{e}");
    let e = x.named("1x").unwrap_err();
    assert!(matches!(e, Error::Job { .. }), "{e:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn functions_whose_shapes_depend_on_values_compute_those_first() {
    // unique's length and bincount's come from the values (a job computes them in a
    // stage of its own; the API computes them when the expression is made), here on the
    // function processes and again in this process.
    let d = Dir::new("values-first");
    for s in [
        d.session(),
        d.session()
            .in_process_bytes(nums_cloud::api::IN_PROCESS_BYTES),
    ] {
        let x = s.from_ndarray(array![3i64, 1, 3, 7, 1, 0].into_dyn());
        let u = s
            .call("unique", &[(&x).into()], &[])
            .unwrap()
            .array()
            .unwrap();
        assert_eq!(u.shape().unwrap(), vec![4]);
        let got = u.compute::<i64>().await.unwrap();
        assert_eq!(got.into_raw_vec_and_offset().0, vec![0, 1, 3, 7]);
        let b = s
            .call("bincount", &[(&x).into()], &[])
            .unwrap()
            .array()
            .unwrap();
        let got = b.compute::<i64>().await.unwrap();
        assert_eq!(
            got.into_raw_vec_and_offset().0,
            vec![1, 2, 0, 2, 0, 0, 0, 1]
        );
        // Made after: the session's graph goes on as before.
        let y = (&x * 2.0).sum(None);
        assert_eq!(y.compute::<f64>().await.unwrap().sum(), 30.0);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn assignment_and_selection_by_data() {
    let d = Dir::new("assign");
    let s = d.session();
    let a = Array2::from_shape_fn((5, 4), |(i, j)| (i * 4 + j) as f64);
    let x = s.from_ndarray(a.clone()).block(&[2, 3]);
    // y = x.copy(); y[1] = 9; y[:, [3, 0]] = -1
    let y = x.set(&[Arg::Int(1)], 9.0).set(
        &[Arg::Slice(None, None, None), Arg::from(vec![3i64, 0])],
        -1.0,
    );
    let mut want = a.clone();
    want.row_mut(1).fill(9.0);
    want.column_mut(3).fill(-1.0);
    want.column_mut(0).fill(-1.0);
    assert_eq!(y.compute::<f64>().await.unwrap(), want.clone().into_dyn());
    // z[z > 10] = 0, the mask not computed first.
    let z = y.set(&[Arg::Array(y.gt(10.0))], 0.0);
    want.mapv_inplace(|v| if v > 10.0 { 0.0 } else { v });
    assert_eq!(z.compute::<f64>().await.unwrap(), want.clone().into_dyn());
    // x[x % 3 == 0] of a 2-D mask, in C order; x[idx] with an integer array.
    let picked = x
        .select(&x.call("remainder", &[Arg::Int(3)], &[]).equal(0.0))
        .await
        .unwrap();
    let flat: Vec<f64> = a.iter().copied().filter(|v| v % 3.0 == 0.0).collect();
    assert_eq!(
        picked
            .compute::<f64>()
            .await
            .unwrap()
            .into_raw_vec_and_offset()
            .0,
        flat
    );
    let idx = s.from_ndarray(array![4i64, 0, -1]);
    let rows = x
        .select(&idx)
        .await
        .unwrap()
        .compute::<f64>()
        .await
        .unwrap();
    assert_eq!(rows.shape(), &[3, 4]);
    assert_eq!(rows.index_axis(ndarray::Axis(0), 2), a.row(4).into_dyn());
    assert_eq!(rows.index_axis(ndarray::Axis(0), 1), a.row(0).into_dyn());
    // Random numbers: a Generator's method and NumS's randn, the same for any blocks.
    let g = s.generator(
        3,
        "integers",
        &[Arg::Int(0), Arg::Int(5), Arg::from(&[40usize, 3][..])],
        &[],
    );
    let a = g.compute::<i64>().await.unwrap();
    let b = g.block(&[7, 2]).compute::<i64>().await.unwrap();
    assert_eq!(a, b);
    assert!(a.iter().all(|&v| (0..5).contains(&v)) && a.shape() == [40, 3]);
    let r = s
        .call("random.randn", &[Arg::Int(4)], &[("seed", Arg::Int(1))])
        .unwrap()
        .array()
        .unwrap();
    assert_eq!(r.shape().unwrap(), vec![4]);
}

/// A slice computes what reaches it and no more: a slice of an elementwise expression is
/// made of its operands' slices, a slice of a random array is made on its own (the same
/// values), a persisted array is read (not recomputed), and a slice of what cannot be
/// pushed reads only the blocks it overlaps. The values are those of the whole, sliced.
#[tokio::test]
async fn a_slice_computes_only_what_reaches_it() {
    use ndarray::s;
    let d = Dir::new("demand");
    let s = d.session();
    // One random block of 4,000 rows, re-blocked into 40 blocks of 100.
    let x = s.random_normal(&[4_000, 16], 3).block(&[100, 16]);
    let b = s.random_normal(&[16], 4);
    let expr = |x: &nums_cloud::api::Array| (x * 2.0 + 1.0) * &b;
    let peek = expr(&x).slice(s![..2, ..2]);
    let e = s.explain(&[&peek]).unwrap();
    // Four random numbers of x, two of b, then * 2, + 1 and * b: five tasks of 2x2.
    assert_eq!(e.tasks, Some(5), "{e}");
    assert!(e.work_bytes <= 5 * 4 * 8, "{e}");
    let got = peek.compute::<f64>().await.unwrap();
    let whole = expr(&x).compute::<f64>().await.unwrap();
    assert_eq!(got, whole.slice(s![..2, ..2]).into_owned().into_dyn());
    let strided = expr(&x).slice(s![7..3000;13, ..;-3]).t();
    assert!(!x.computed());
    let want = whole.slice(s![7..3000;13, ..;-3]).t().to_owned().into_dyn();
    assert_eq!(strided.compute::<f64>().await.unwrap(), want);
    // Steps, backwards, a transpose, a slice of a slice: the same bits as the whole's.
    let xv = x.compute::<f64>().await.unwrap();
    let back = x.t().slice(s![3..9;2, -150..]).slice(s![.., ..;-7]);
    let e = s.explain(&[&back]).unwrap();
    // x is computed now: read, two of its blocks.
    assert!(e.work_bytes < 3 * 100 * 16 * 8, "{e}");
    let want = xv
        .t()
        .slice(s![3..9;2, -150..])
        .slice(s![.., ..;-7])
        .to_owned();
    assert_eq!(back.compute::<f64>().await.unwrap(), want.into_dyn());
    // A persisted array is read, not made again: `(A * 2)[:3]` reads one block of A.
    let a = (&x + 0.5).named("A").unwrap();
    s.persist(&a).await.unwrap();
    let head = (&a * 2.0).slice(s![..3, ..]);
    assert_eq!(s.explain(&[&head]).unwrap().tasks, Some(2));
    assert_eq!(
        head.compute::<f64>().await.unwrap(),
        ((xv.slice(s![..3, ..]).to_owned() + 0.5) * 2.0).into_dyn()
    );
    // A slice of what is not elementwise (a sum along rows) reads the blocks it overlaps.
    let c = x.sum(Some(&[1]));
    let tail = c.slice(s![-3..]);
    assert_eq!(s.explain(&[&c]).unwrap().tasks, Some(40));
    assert_eq!(s.explain(&[&tail]).unwrap().tasks, Some(2));
    let got = tail.compute::<f64>().await.unwrap();
    let want = xv
        .sum_axis(ndarray::Axis(1))
        .slice(s![-3..])
        .to_owned()
        .into_dyn();
    let off = (&got - &want)
        .mapv(f64::abs)
        .fold(0.0, |m: f64, &v| m.max(v));
    assert!(off < 1e-9, "{got} {want}");
}

/// The progress of a persist of 8 blocks in 2 invocations on local function processes:
/// task-level updates arrive before either invocation answers (the processes report as
/// they go), the counts end at the plan's totals (8 tasks, 2 invocations, the bytes the
/// functions wrote), the stage is named, and an ETA is projected from the start. Asserts
/// the sequence of updates, not their timing.
#[tokio::test(flavor = "multi_thread")]
async fn progress_moves_with_tasks_before_invocations_answer() {
    use std::sync::{Arc, Mutex};
    let d = Dir::new("progress");
    let seen: Arc<Mutex<Vec<nums_cloud::api::ProgressUpdate>>> = Arc::default();
    let keep = seen.clone();
    let s = d.session().workers(2).progress_to(
        move |u| keep.lock().unwrap().push(u.clone()),
        std::time::Duration::ZERO,
    );
    // 8 row blocks of 2,000 x 100 float64 (1.6 MB each), over 2 workers.
    let x = s.random_normal(&[16_000, 100], 7).block(&[2_000, 100]);
    s.persist(&x).await.unwrap();
    let c = s.counts();
    assert_eq!((c.invocations, c.tasks), (2, 8), "{c:?}");
    let seen = seen.lock().unwrap().clone();
    let last = seen.last().expect("updates");
    assert!(last.finished, "{last:?}");
    assert_eq!(seen.iter().filter(|u| u.finished).count(), 1);
    assert_eq!((last.tasks_done, last.tasks_total), (8, 8), "{last:?}");
    assert_eq!(last.invocations_done, 2);
    // 12.8 MB of random float64 written, which zstd barely shrinks.
    assert!(last.bytes_moved > 10_000_000, "{last:?}");
    assert!(seen.iter().any(|u| u.stage == "main"), "{seen:?}");
    // Tasks counted while no invocation had answered yet: the reports of the first
    // invocation to answer came before its answer.
    assert!(
        seen.iter()
            .any(|u| u.invocations_done == 0 && u.tasks_done > 0 && u.tasks_done < 8),
        "{seen:?}"
    );
    // Never back, never past the total; an ETA from the first update of the stage on.
    assert!(seen.windows(2).all(|w| w[0].tasks_done <= w[1].tasks_done));
    assert!(seen.iter().all(|u| u.tasks_done <= u.tasks_total));
    let first = seen.iter().find(|u| u.stage == "main").unwrap();
    assert!(first.eta_seconds.is_some_and(|e| e > 0.0), "{first:?}");
}
