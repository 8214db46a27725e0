"""The user guide (docs/guide.md) against the binary and the job-file parser: every command
and flag the guide names exists in `nums-cloud --help`, every command and flag there is in
the guide, every job-file key the parser accepts is in the guide's key table, and every
example of that table is accepted by `nums-cloud check` (while a misspelt key is refused)."""
import re
import subprocess

import numpy as np
import pytest
import zarr

from nums import BIN, REPO

GUIDE = (REPO / "docs" / "guide.md").read_text()
JOB_RS = (REPO / "driver" / "src" / "job.rs").read_text()
# Options every command takes (documented once, under "The command line").
GLOBAL = {"--verbose", "--quiet", "--help"}


def nums(*args, cwd=None, env=None):
    import os
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=60, cwd=cwd,
                          env={**os.environ, **(env or {})})


def long_flags(text):
    return set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", text))


def subcommands():
    """The subcommands `nums-cloud --help` lists (clap's own `help` left out)."""
    out = nums("--help").stdout
    block = out.split("Commands:\n", 1)[1].split("\n\n", 1)[0]
    names = [line.split()[0] for line in block.splitlines() if line.startswith("  ") and line.split()]
    assert "run" in names and "check" in names, out
    return [n for n in names if n != "help"]


def help_flags(cmd):
    return long_flags(nums(cmd, "--help").stdout.split("Options:", 1)[1]) - GLOBAL


def code_snippets(text):
    """Inline code spans and the lines of fenced blocks."""
    fenced = re.findall(r"```[a-z]*\n(.*?)```", text, re.S)
    outside = re.sub(r"```[a-z]*\n.*?```", "", text, flags=re.S)
    # A fenced line's comment (`# ...`, `// ...`) is prose.
    lines = [re.sub(r"\s(#|//) .*$", "", line) for b in fenced for line in b.splitlines()]
    return re.findall(r"`([^`\n]+)`", outside) + lines


def cli_sections():
    """The guide's command-line chapter, one (heading, text) per `###` section."""
    chapter = GUIDE.split("\n## The command line\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^### ([^\n]*)\n(.*?)(?=^### |\Z)", chapter, re.S | re.M)


def test_every_command_in_help_is_in_the_guide_and_back():
    cmds = subcommands()
    for c in cmds:
        assert re.search(rf"`nums-cloud {c}\b", GUIDE), f"`nums-cloud {c}` is not in the guide"
    named = {m for s in code_snippets(GUIDE) for m in re.findall(r"(?<![\w/-])nums-cloud ([a-z]+)\b", s)}
    assert named, "the guide names no command"
    assert named <= set(cmds), f"the guide names commands nums-cloud does not have: {named - set(cmds)}"


def test_every_flag_in_help_is_in_the_guide_and_back():
    cmds = subcommands()
    sections = cli_sections()
    covered = set()
    every = set().union(*(help_flags(c) for c in cmds))
    for heading, text in sections:
        # A section covers the commands its heading names: `nums-cloud X` or `X`.
        mine = [c for c in cmds if re.search(rf"`(nums-cloud )?{c}`", heading)]
        assert mine, f"section {heading!r} names no command"
        covered.update(mine)
        have = set().union(*(help_flags(c) for c in mine))
        written = long_flags(text)
        assert have <= written, f"{heading}: flags in --help but not in the guide: {sorted(have - written)}"
        # Other commands' flags may be named in passing (`run --timeline`).
        assert written <= every | GLOBAL, f"{heading}: flags in the guide that nums-cloud lacks: {sorted(written - every - GLOBAL)}"
    assert covered == set(cmds), f"commands without a section: {set(cmds) - covered}"
    top = long_flags(nums("--help").stdout.split("Options:", 1)[1])
    for f in top | GLOBAL:
        assert f in GUIDE, f"global option {f} is not in the guide"
    # Every flag in an invocation anywhere in the guide belongs to the command it follows.
    for s in code_snippets(GUIDE):
        for cmd, rest in re.findall(r"(?<![\w/-])nums-cloud ([a-z]+)\b([^|;&]*)", s):
            extra = long_flags(rest) - help_flags(cmd) - GLOBAL
            assert not extra, f"{s!r}: nums-cloud {cmd} has no {sorted(extra)}"


def parser_keys():
    """The keys driver/src/job.rs accepts: its raw structs' fields and an array's KEYS."""
    def fields(struct):
        body = re.search(rf"struct {struct} \{{(.*?)\}}", JOB_RS, re.S).group(1)
        return re.findall(r"^\s*(\w+): Option<", body, re.M)
    top = fields("RawJob")
    assert top == ["name", "storage", "compute", "arrays", "outputs"], top
    keys = {"name", "arrays.NAME", "outputs.NAME"}
    keys |= {f"storage.{k}" for k in fields("RawStorage")}
    keys |= {f"compute.{k}" for k in fields("RawCompute")}
    array_keys = re.search(r"const KEYS: &\[&str\] = &\[(.*?)\];", JOB_RS, re.S).group(1)
    keys |= {f"arrays.NAME.{k}" for k in re.findall(r'"(\w+)"', array_keys)}
    output_keys = re.search(r"const OUTPUT_KEYS: &\[&str\] = &\[(.*?)\];", JOB_RS, re.S).group(1)
    keys |= {f"outputs.NAME.{k}" for k in re.findall(r'"(\w+)"', output_keys)}
    return keys


def guide_keys():
    """(key, example) for every example in the guide's key table."""
    table = GUIDE.split("\n### Every key\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([\w.]+)` \| (.+) \|$", table, re.M)
    return [(k, ex) for k, cell in rows for ex in re.findall(r"`([^`]+)`", cell)]


def test_the_key_table_documents_every_key_the_parser_accepts():
    documented = {k for k, _ in guide_keys()}
    assert documented == parser_keys(), (
        f"in the parser, not the guide: {sorted(parser_keys() - documented)}; "
        f"in the guide, not the parser: {sorted(documented - parser_keys())}")


@pytest.fixture
def data(tmp_path):
    """Inputs the examples load: data/a.npy, data/a.csv, data/a.parquet and the Zarr v3
    array data/a.zarr."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    a = np.arange(32.0).reshape(8, 4)
    (tmp_path / "data").mkdir()
    np.save(tmp_path / "data" / "a.npy", a)
    np.savetxt(tmp_path / "data" / "a.csv", a, delimiter=",")
    pq.write_table(pa.table({f"c{j}": a[:, j] for j in range(4)}), tmp_path / "data" / "a.parquet")
    z = zarr.create_array(str(tmp_path / "data" / "a.zarr"), shape=a.shape, chunks=(4, 4), dtype="float64")
    z[:] = a
    return tmp_path


def job_for(key, example):
    """A small job whose only unusual line is `example` (in the table `key` belongs to)."""
    section = key.split(".")[0]
    storage = {"url": None, "endpoint": None}
    lines = {"compute": [], "arrays": ['A = { random = "normal", shape = [8, 4], seed = 1 }'], "outputs": []}
    if section == "storage":
        storage[key.split(".")[1]] = example
    elif section in lines:
        lines[section].append(example)
    if "my-bucket" in example or storage["endpoint"]:
        storage["url"] = storage["url"] or 'url = "s3://my-bucket/docs"'
        storage["endpoint"] = storage["endpoint"] or 'endpoint = "http://127.0.0.1:3900"'
    text = (example if key == "name" else 'name = "docs"') + "\n"
    if any(storage.values()):
        text += "[storage]\n" + "".join(f"{v}\n" for v in storage.values() if v)
    for s, body in lines.items():
        text += f"[{s}]\n" + "".join(f"{v}\n" for v in body)
    return text


def check_examples(examples, tmp_path, garage=None):
    assert examples
    for key, example in examples:
        # The example uses its key.
        last = key.split(".")[-1]
        if last == "NAME":
            assert re.match(r'^\w+ = "', example), (key, example)
        else:
            assert re.search(rf"(^|[{{,] ){last} = ", example), (key, example)
        text = job_for(key, example)
        env = None
        if garage:
            text = text.replace("my-bucket", garage.bucket).replace("http://127.0.0.1:3900", garage.endpoint)
            env = garage.env()
        (tmp_path / "job.toml").write_text(text)
        p = nums("check", str(tmp_path / "job.toml"), env=env)
        assert p.returncode == 0, f"{key}: {example}\n{text}\n{p.stderr}"
        assert ": ok (" in p.stdout, p.stdout


def test_every_key_in_the_guide_is_accepted_by_check(data):
    check_examples([(k, e) for k, e in guide_keys() if "my-bucket" not in e and "endpoint" not in k], data)


def test_every_s3_key_in_the_guide_is_accepted_by_check(data, garage):
    check_examples([(k, e) for k, e in guide_keys() if "my-bucket" in e or "endpoint" in k], data, garage)


def test_the_guides_job_files_check(data):
    blocks = re.findall(r"```toml\n(.*?)```", GUIDE, re.S)
    assert blocks
    for b in blocks:
        (data / "job.toml").write_text(b)
        p = nums("check", str(data / "job.toml"))
        assert p.returncode == 0, f"{b}\n{p.stderr}"


@pytest.mark.parametrize("text,line,word", [
    ('nmae = "x"\n', 1, "nmae"),
    ('[storage]\nurll = "file://d"\n', 2, "urll"),
    ('[compute]\nworkers = 2\nwrokers = 3\n', 3, "wrokers"),
    ('[arrays]\nA = { random = "normal", shape = [2], sed = 1 }\n', 2, "arrays.A.sed"),
    ('[arrays]\nA = { zeros = [2] }\n[outputs]\nA = { path = "a.npy", hedaer = true }\n', 4, "outputs.A.hedaer"),
])
def test_a_key_not_in_the_guide_is_refused(text, line, word, tmp_path):
    """The examples' checks above can fail: check refuses what the parser does not know."""
    (tmp_path / "job.toml").write_text(text)
    p = nums("check", str(tmp_path / "job.toml"))
    assert p.returncode != 0, p.stdout
    assert f"job.toml:{line}:" in p.stderr and word in p.stderr, p.stderr


def cost_models():
    """The calibrations of driver/src/cost.rs: {"local": {field: value}, "local-s3": ..., "lambda": ...}."""
    text = (REPO / "driver" / "src" / "cost.rs").read_text()
    models = {}
    for body in re.findall(r"pub(?:\(crate\))? const \w+: CostModel = CostModel \{(.*?)\n\};", text, re.S):
        # Strings (the name, the error band) and numbers, one field a line.
        strings = dict(re.findall(r'^\s*(\w+): "(.*)",$', body, re.M))
        numbers = {k: v for k, v in re.findall(r"^\s*(\w+): ([^,\n\"]+),$", body, re.M)}
        name = strings.pop("name")
        models[name] = {k: float("inf") if v in ("usize::MAX", "f64::INFINITY") else float(v.replace("_", ""))
                        for k, v in numbers.items()}
        models[name]["strings"] = strings
    assert set(models) == set(MODELS), models
    return models


MODELS = ["local", "local-s3", "lambda"]  # the guide's table's columns, in order
UNITS = {"s": 1, "workers": 1, "workers/s": 1, "MB/s": 1e6, "GFLOP/s": 1e9, "GB/s": 1e9, "Melem/s": 1e6}


def test_the_cost_model_table_has_cost_rs_figures():
    """The guide's table of calibrations states the constants plan uses, every one."""
    models = cost_models()
    for name, m in models.items():
        band = m.pop("strings").pop("error_band", None)
        if band is not None:
            assert f"- `{name}`: {band}\n" in GUIDE, (
                f"docs/guide.md should quote the {name} model's error band as cost.rs states it: {band}")
    rows = re.findall(r"^\| `(\w+)` \| ([\w/]+) \| ([\w.]+) \| ([\w.]+) \| ([\w.]+) \|", GUIDE, re.M)
    rows = {r[0]: r[1:] for r in rows if r[0] in models["local"] or r[1] in UNITS}
    assert set(rows) == set(models["local"]), f"fields of cost.rs and of the guide's table: {sorted(models['local'])} {sorted(rows)}"
    for field, (unit, *values) in rows.items():
        for model, written in zip(MODELS, values):
            want = models[model][field]
            got = float("inf") if written == "unlimited" else float(written) * UNITS[unit]
            assert got == pytest.approx(want, rel=1e-9), (
                f"docs/guide.md's cost model table says {field} = {written} {unit} for {model}; "
                f"driver/src/cost.rs says {want}: update the table")


def test_the_reliability_figures_are_the_codes():
    """The lease, retry and backup figures the guide states, as the code sets them."""
    src = lambda p: (REPO / p).read_text()  # noqa: E731
    runs, dispatch, store = src("driver/src/runs.rs"), src("driver/src/dispatch/policy.rs"), src("layout/src/store/mod.rs")
    ttl = re.search(r"LEASE_TTL: Duration = Duration::from_secs\((\d+)\)", runs).group(1)
    renew = re.search(r"LEASE_RENEW: Duration = Duration::from_secs\((\d+)\)", runs).group(1)
    policy = re.search(r"impl Default for Policy \{.*?\n\}", dispatch, re.S).group(0)
    backups = re.search(r"impl Default for Backups \{.*?\n\}", dispatch, re.S).group(0)
    field = lambda body, name: re.search(rf"{name}: ([^,]+),", body).group(1)  # noqa: E731
    budget = re.search(r"\.unwrap_or\((\d+)\);\s*Duration::from_secs\(secs\)", store).group(1)
    section = GUIDE.split("\n## Reliability guarantees\n", 1)[1].split("\n## ", 1)[0]
    section = " ".join(section.split())
    base_ms = re.search(r"from_millis[(]([0-9]+)", field(policy, "backoff_base")).group(1)
    cap_s = re.search(r"from_secs[(]([0-9]+)", field(policy, "backoff_cap")).group(1)
    wants = [
        f"renewed every {renew} s", f"expiring {ttl} s after its driver is gone",
        f"backoff for {budget} s (`NUMS_STORE_RETRY_SECONDS`)",
        f"up to {field(policy, 'throttled_attempts')} times",
        f"backoff from {base_ms} ms",
        f"capped at {cap_s} s",
        f"up to {field(policy, 'attempts')} attempts",
        f"over {float(field(backups, 'slow_factor')):g} times the median",
        f"over {float(field(backups, 'overdue_factor')):g} times its projection",
        f"(and {re.search(r'from_secs[(]([0-9]+)', field(backups, 'min_overdue')).group(1)} s)",
    ]
    assert field(backups, "min_done_fraction") == "0.5" and "half of those started are finished" in section
    assert field(backups, "stalled_relief") == "0.5" and "both limits halve" in section
    for w in wants:
        assert w in section, f"docs/guide.md's reliability section should say {w!r} (the code's figure)"


def test_the_memory_projection_base_is_the_codes():
    sched = (REPO / "function" / "src" / "memory.rs").read_text()
    base = int(re.search(r"pub(?:\(crate\))? const BASE_MEMORY: u64 = (\d+) << 20;", sched).group(1))
    assert f"a base of {base} MiB" in " ".join(GUIDE.split()), f"the guide should say the base is {base} MiB"
    read = int(re.search(r"pub const READ_MEMORY: u64 = (\d+) << 10;", sched).group(1))
    assert f"{read} KiB per block it reads" in " ".join(GUIDE.split())
    lib = (REPO / "function" / "src" / "lib.rs").read_text()
    at_once = int(re.search(r"const IO_CONCURRENCY: usize = (\d+);", lib).group(1))
    assert f"at most {at_once} blocks at once" in " ".join(GUIDE.split())


def test_the_batch_description_figures_are_the_codes():
    mem = (REPO / "function" / "src" / "memory.rs").read_text()
    sched = (REPO / "driver" / "src" / "sched" / "mod.rs").read_text()
    task = int(re.search(r"pub const TASK_MEMORY: u64 = 1 << (\d+);", mem).group(1))
    inp = int(re.search(r"pub const INPUT_MEMORY: u64 = (\d+);", mem).group(1))
    arr = int(re.search(r"pub const ARRAY_MEMORY: u64 = (\d+) << 10;", mem).group(1))
    most = int(re.search(r"pub const MAX_BATCH_TASKS: usize = (\d+);", sched).group(1))
    guide = " ".join(GUIDE.split())
    assert f"{(1 << task) >> 10} KiB per task" in guide
    assert f"{inp} bytes per input reference" in guide
    assert f"{arr} KiB per array" in guide
    assert f"at most {most:,} tasks" in guide


def test_every_example_job_passes_check():
    """The README's quick-start and the other examples stay valid as the language grows
    (a new function's name is reserved: `positive` of the quick-start was refused once
    np.positive came)."""
    from nums import BIN
    jobs = sorted((REPO / "examples").glob("*.toml"))
    assert any(j.name == "quickstart.toml" for j in jobs)
    for job in jobs:
        p = subprocess.run([BIN, "check", str(job)], capture_output=True, text=True, timeout=60, cwd=REPO)
        assert p.returncode == 0, f"{job.name}: {p.stderr}"
