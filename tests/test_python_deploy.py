"""Deploying from Python (issue 43, item 7): ``python -m nums_cloud deploy FOLDER`` writes
infra/'s Terraform and the Lambda zip to a folder, runs terraform there with the AWS
settings the user already has, saves its outputs, and ``nums_cloud.init(infra=...)`` takes
them. Here from this checkout (infra/ of the source tree, a small zip of our own); the
installed wheel, which carries both, in tests/test_wheel.py.

No AWS: a stand-in `terraform` program (tests/nums.py) first on the PATH logs what it is
asked and answers `output -json` as infra/examples/basic would. The AWS clients of the
init test would go to a closed port on 127.0.0.1, and compute nothing.
"""
import json
import os
import pty
import shlex
import subprocess
import sys
import zipfile

from nums import REPO, fake_terraform, terraform_calls

INFRA = REPO / "infra"


def small_zip(path):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("bootstrap", "#!/bin/sh\n")
    return path


def clean_env(tmp_path, **extra):
    """The environment with no AWS settings of this machine's (a config file of the test's)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_CONFIG_FILE=str(tmp_path / "no-aws-config"),
               AWS_ENDPOINT_URL="http://127.0.0.1:9", FAKE_TF_LOG=str(tmp_path / "tf.log"))
    env.update(extra)
    return env


def deploy(tmp_path, folder, *args, env, path=None):
    bin_dir = fake_terraform(tmp_path / "bin")
    env = dict(env, PATH=path if path is not None else f"{bin_dir}:{env['PATH']}")
    return subprocess.run([sys.executable, "-m", "nums_cloud", "deploy", str(folder), *args],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)


def test_deploy_uses_the_aws_profile_and_region_the_user_has(tmp_path):
    (tmp_path / "config").write_text("[default]\nregion = us-east-2\n"
                                     "[profile analyst]\nregion = eu-central-1\n")
    env = clean_env(tmp_path, AWS_PROFILE="analyst", AWS_CONFIG_FILE=str(tmp_path / "config"))
    zip_path = small_zip(tmp_path / "b.zip")
    folder = tmp_path / "deployment"
    p = deploy(tmp_path, folder, "--zip", str(zip_path), "--yes", env=env)
    assert p.returncode == 0, p.stderr
    calls = terraform_calls(tmp_path / "tf.log")
    assert [c["argv"] for c in calls] == [["init", "-input=false"],
                                          ["apply", "-input=false", "-auto-approve"],
                                          ["output", "-json"]]
    # The profile's region from ~/.aws/config; terraform gets both as variables and
    # in its environment.
    assert {(c["cwd"], c["AWS_PROFILE"], c["AWS_REGION"]) for c in calls} == {
        (str(folder), "analyst", "eu-central-1")}
    assert calls[1]["tfvars"] == {"region": "eu-central-1", "profile": "analyst",
                                  "architecture": "x86_64", "zip_path": "bootstrap-x86_64.zip"}
    assert (folder / "bootstrap-x86_64.zip").read_bytes() == zip_path.read_bytes()
    for tf in (INFRA / "modules" / "nums-cloud").glob("*.tf"):
        assert (folder / "modules" / "nums-cloud" / tf.name).read_text() == tf.read_text()
    main = (folder / "main.tf").read_text()
    assert 'source               = "./modules/nums-cloud"' in main
    assert main.replace("./modules", "../../modules") == (INFRA / "examples/basic/main.tf").read_text()
    out = folder / "terraform-output.json"
    saved = json.loads(out.read_text())
    assert saved["storage_url"]["value"] == "s3://nums-cloud-123456789012-eu-central-1/jobs"
    assert f"nums_cloud.init(infra={str(out)!r})" in p.stdout
    assert f"cd {folder} && terraform destroy" in p.stdout

    # Arguments win over the environment: AWS_REGION names another region.
    env2 = dict(env, AWS_REGION="us-west-2")
    (tmp_path / "tf.log").unlink()
    p = deploy(tmp_path, tmp_path / "second", "--zip", str(zip_path), "--yes", "--region",
               "ap-south-1", "--profile", "ops", "--bucket", "my-bucket", "--memory-mb", "4096",
               env=env2)
    assert p.returncode == 0, p.stderr
    calls = terraform_calls(tmp_path / "tf.log")
    assert {(c["AWS_PROFILE"], c["AWS_REGION"]) for c in calls} == {("ops", "ap-south-1")}
    assert calls[-1]["tfvars"] == {"region": "ap-south-1", "profile": "ops",
                                   "bucket_name": "my-bucket", "memory_mb": 4096,
                                   "architecture": "x86_64", "zip_path": "bootstrap-x86_64.zip"}

    # Deployed again in the same folder, the settings given before are kept (the state is
    # there: a new region or bucket would be another deployment); only memory changes.
    p = deploy(tmp_path, tmp_path / "second", "--zip", str(zip_path), "--yes",
               "--memory-mb", "3008", env=env2)
    assert p.returncode == 0, p.stderr
    assert terraform_calls(tmp_path / "tf.log")[-1]["tfvars"] == {
        "region": "ap-south-1", "profile": "ops", "bucket_name": "my-bucket",
        "memory_mb": 3008, "architecture": "x86_64", "zip_path": "bootstrap-x86_64.zip"}


def on_a_terminal(cmd, env, cwd, answer):
    """Runs ``cmd`` with a terminal (a pseudo-terminal) for its standard streams, typing
    ``answer`` when terraform asks; returns its exit code and what the terminal showed."""
    master, slave = pty.openpty()
    p = subprocess.Popen(cmd, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd)
    os.close(slave)
    shown, typed = b"", False
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the other end closed: the program ended
            break
        if not chunk:
            break
        shown += chunk
        if not typed and b"Enter a value:" in shown:
            os.write(master, answer.encode() + b"\n")
            typed = True
    os.close(master)
    return p.wait(timeout=60), shown.decode(errors="replace")


def test_on_a_terminal_terraform_asks_before_it_applies(tmp_path):
    env = clean_env(tmp_path, AWS_REGION="eu-west-1")
    env["PATH"] = f"{fake_terraform(tmp_path / 'bin')}:{env['PATH']}"
    z = str(small_zip(tmp_path / "b.zip"))
    cmd = [sys.executable, "-m", "nums_cloud", "deploy", str(tmp_path / "d"), "--zip", z]
    code, shown = on_a_terminal(cmd, env, tmp_path, "yes")
    assert code == 0, shown
    calls = terraform_calls(tmp_path / "tf.log")
    # No -auto-approve: terraform's own question, answered on the user's terminal.
    assert [c["argv"] for c in calls] == [["init", "-input=false"], ["apply"], ["output", "-json"]]
    assert calls[1]["answer"] == "yes" and calls[1]["tty"]
    assert "nums-cloud is deployed" in shown and (tmp_path / "d" / "terraform-output.json").is_file()
    # Answered no: nothing saved, and the error says where to go on.
    code, shown = on_a_terminal([*cmd[:4], str(tmp_path / "e"), *cmd[5:]], env, tmp_path, "no")
    assert code == 1 and "`terraform apply` failed (exit 1)" in shown, shown
    assert not (tmp_path / "e" / "terraform-output.json").exists()


def test_without_terraform_the_folder_is_ready_and_the_error_says_how(tmp_path):
    env = clean_env(tmp_path, AWS_REGION="eu-west-1")
    folder = tmp_path / "my deployment"
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    p = deploy(tmp_path, folder, "--zip", str(small_zip(tmp_path / "b.zip")), "--yes",
               env=env, path=str(empty))
    assert p.returncode == 1
    err = p.stderr
    assert "terraform is not on the PATH" in err and "install Terraform" in err, err
    assert "https://developer.hashicorp.com/terraform/install" in err
    # The commands to run there, ready to paste (the folder's space quoted).
    assert f"{folder} holds the deployment (cd {shlex.quote(str(folder))} && terraform init && " \
           "terraform apply && terraform output -json > terraform-output.json)" in err, err
    assert "Traceback" not in err
    assert {f.name for f in folder.iterdir()} == {"main.tf", "modules", "bootstrap-x86_64.zip",
                                                  "terraform.tfvars.json"}
    assert json.loads((folder / "terraform.tfvars.json").read_text())["region"] == "eu-west-1"
    assert not (tmp_path / "tf.log").exists()


def test_bad_input_is_refused_before_terraform_runs_naming_the_argument(tmp_path):
    env = clean_env(tmp_path)
    z = str(small_zip(tmp_path / "b.zip"))

    def refused(*args, **kw):
        p = deploy(tmp_path, tmp_path / "d", *args, env=kw.get("env", env))
        assert p.returncode != 0 and "Traceback" not in p.stderr, p.stderr
        return p.stderr

    assert "no AWS region" in refused("--zip", z, "--yes")
    env = dict(env, AWS_REGION="eu-west-1")
    assert "memory_mb must be a whole number of MB from 128 to 10240" in refused(
        "--zip", z, "--memory-mb", "64", "--yes")
    e = refused("--arch", "arm64", "--yes")
    assert "bootstrap-arm64.zip" in e and "nums-cloud package --arch arm64" in e, e
    (tmp_path / "not.zip").write_text("text")
    assert "is not a zip file" in refused("--zip", str(tmp_path / "not.zip"), "--yes")
    # Without --yes and no terminal to confirm on, terraform is not started.
    assert "pass yes=True (--yes)" in refused("--zip", z)
    assert not (tmp_path / "tf.log").exists()
    # A folder of the user's own is not written into.
    own = tmp_path / "own"
    own.mkdir()
    (own / "notes.txt").write_text("mine")
    p = deploy(tmp_path, own, "--zip", z, "--yes", env=env)
    assert p.returncode == 1 and "holds other files" in p.stderr and str(own) in p.stderr
    assert [f.name for f in own.iterdir()] == ["notes.txt"]


INIT = r"""
import json, os, sys
from pathlib import Path
import nums_cloud
# As nums_cloud.deploy returns it (a Path), or a str with ~ as the docs write it.
infra = Path(sys.argv[1]) if sys.argv[2] == "path" else sys.argv[1]
s = nums_cloud.init(infra=infra, progress=False)
print(json.dumps({"settings": s.settings(), "AWS_REGION": os.environ.get("AWS_REGION"),
                  "AWS_PROFILE": os.environ.get("AWS_PROFILE")}))
"""


def test_init_takes_the_deployments_outputs_and_its_aws_settings(tmp_path):
    env = clean_env(tmp_path, AWS_REGION="ap-south-1")
    z = str(small_zip(tmp_path / "b.zip"))
    p = deploy(tmp_path, tmp_path / "d", "--zip", z, "--yes", "--profile", "ops",
               "--memory-mb", "4096", env=env)
    assert p.returncode == 0, p.stderr
    out = str(tmp_path / "d" / "terraform-output.json")

    def init(infra=out, kind="str", **aws):
        e = {k: v for k, v in env.items() if k not in ("AWS_REGION", "AWS_PROFILE")}
        p = subprocess.run([sys.executable, "-c", INIT, infra, kind], cwd=tmp_path,
                           env={**e, "HOME": str(tmp_path), **aws}, capture_output=True,
                           text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout)

    got = init(kind="path")
    assert init("~/d/terraform-output.json") == got
    s = got["settings"]
    assert (s["backend"], s["function"], s["storage"], s["memory_mb"], s["workers"]) == (
        "lambda", "nums-cloud", "s3://nums-cloud-123456789012-ap-south-1/jobs", 4096, 20)
    # The deployment's region and profile, for the engine's AWS clients.
    assert (got["AWS_REGION"], got["AWS_PROFILE"]) == ("ap-south-1", "ops")
    # What the environment names is left as it is (a region that differs is refused at
    # the first compute, with what to set).
    got = init(AWS_REGION="eu-west-1", AWS_PROFILE="mine")
    assert (got["AWS_REGION"], got["AWS_PROFILE"]) == ("eu-west-1", "mine")
    # NUMS_CLOUD_INFRA too.
    e = {k: v for k, v in env.items() if k not in ("AWS_REGION", "AWS_PROFILE")}
    p = subprocess.run([sys.executable, "-c", INIT.replace("infra=infra, ", ""), "", "str"],
                       env={**e, "NUMS_CLOUD_INFRA": out}, cwd=tmp_path, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["AWS_REGION"] == "ap-south-1"
