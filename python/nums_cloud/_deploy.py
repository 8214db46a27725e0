"""Deploying on AWS Lambda from Python: ``nums_cloud.deploy(folder)`` or ``python -m
nums_cloud deploy FOLDER`` writes infra/'s Terraform and the Lambda zip that the wheel
carries to a folder, applies it with terraform, and saves ``terraform output -json`` there
for ``nums_cloud.init(infra=...)`` (docs/deploy.md, "From Python").

Only the standard library: ``nums_cloud`` loads this module when it is first used."""

import configparser
import json
import os
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

__all__ = ["deploy", "DeployError", "OUTPUTS"]

#: The file a deployment's ``terraform output -json`` is saved to, in its folder.
OUTPUTS = "terraform-output.json"
# Terraform reads this file of variables by itself, for apply and for a later destroy.
TFVARS = "terraform.tfvars.json"
ARCHITECTURES = ("x86_64", "arm64")
ROOT_MODULE = Path("examples") / "basic" / "main.tf"
MODULE = Path("modules") / "nums-cloud"
# The root module's path to the module inside infra/, and inside a deployment's folder.
MODULE_SOURCE = ('"../../modules/nums-cloud"', '"./modules/nums-cloud"')

_PACKAGE = Path(__file__).resolve().parent
# What a wheel carries (scripts/wheel.sh stages it here); else, run from a source tree,
# that tree's infra/ and `nums-cloud package`'s default output.
_SHIPPED = _PACKAGE / "_lambda"
_SOURCE = _PACKAGE.parent.parent


class DeployError(RuntimeError):
    """A deployment that could not be made: terraform missing or failing. The message
    says what to do, and names the folder that holds what was prepared."""


def zip_name(architecture):
    """The zip ``nums-cloud package --arch ARCH`` makes."""
    return f"bootstrap-{architecture}.zip"


def shipped_zip(architecture="x86_64"):
    """The Lambda zip this installation carries for ``architecture``, or None (a wheel
    carries the x86_64 one; a source tree has what ``nums-cloud package`` built)."""
    for p in (_SHIPPED / zip_name(architecture),
              _SOURCE / "target" / "lambda" / zip_name(architecture)):
        if p.is_file():
            return p
    return None


def shipped_infra():
    """The Terraform of infra/ that this installation carries, or None."""
    for p in (_SHIPPED / "infra", _SOURCE / "infra"):
        if (p / ROOT_MODULE).is_file() and (p / MODULE / "main.tf").is_file():
            return p
    return None


def aws_config_region(profile=None):
    """The region that ``~/.aws/config`` (or ``$AWS_CONFIG_FILE``) gives ``profile``
    (``default`` when None), or None."""
    path = Path(os.environ.get("AWS_CONFIG_FILE") or Path.home() / ".aws" / "config")
    cp = configparser.RawConfigParser()
    try:
        cp.read(path.expanduser())
    except configparser.Error as e:
        raise ValueError(f"{path}: not an AWS config file ({e})") from None
    name = profile or "default"
    for section in (f"profile {name}", name) if name == "default" else (f"profile {name}",):
        if cp.has_option(section, "region"):
            return cp.get(section, "region").strip() or None
    return None


def aws_region(profile=None):
    """The region the AWS tools pick: ``AWS_REGION``, ``AWS_DEFAULT_REGION``, else the
    profile's in the AWS config file; None when none says."""
    return (os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
            or aws_config_region(profile))


def _outputs_value(outputs, key):
    v = outputs.get(key)
    return v.get("value") if isinstance(v, dict) else v


def use_deployment_aws(infra):
    """What ``init(infra=...)`` takes for the AWS clients from a deployment's outputs: its
    region as ``AWS_REGION`` and the profile it was deployed with as ``AWS_PROFILE``, each
    only when the environment names none (the engine's AWS clients read them there).
    A file that cannot be read is left to the engine, whose error names it."""
    try:
        outputs = json.loads(Path(infra).read_text())
    except (OSError, ValueError):
        return
    if not isinstance(outputs, dict):
        return
    region, profile = _outputs_value(outputs, "region"), _outputs_value(outputs, "profile")
    if isinstance(region, str) and region and not (
            os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")):
        os.environ["AWS_REGION"] = region
    if isinstance(profile, str) and profile and not os.environ.get("AWS_PROFILE"):
        os.environ["AWS_PROFILE"] = profile


def _previous(folder):
    """The variables of an earlier deployment in ``folder`` ({} for a new or empty one);
    a folder holding anything else is refused, so nothing of the user's is overwritten."""
    if not folder.exists():
        return {}
    if not folder.is_dir():
        raise ValueError(f"folder {str(folder)!r} is a file, not a folder")
    tfvars = folder / TFVARS
    if tfvars.is_file():
        try:
            prev = json.loads(tfvars.read_text())
        except ValueError as e:
            raise ValueError(f"{tfvars}: not JSON ({e})") from None
        return prev if isinstance(prev, dict) else {}
    if any(folder.iterdir()):
        raise ValueError(f"folder {str(folder)!r} holds other files: give a new or empty "
                         "folder (or one an earlier deploy made)")
    return {}


def prepare(folder, *, region=None, profile=None, bucket=None, memory_mb=None,
            architecture=None, zip=None):
    """Writes the deployment's Terraform to ``folder`` (see :func:`deploy`, which takes
    the same arguments) and returns the variables it set."""
    folder = Path(folder).expanduser().resolve()
    prev = _previous(folder)
    profile = profile or prev.get("profile") or os.environ.get("AWS_PROFILE") or None
    region = region or prev.get("region") or aws_region(profile)
    if not region:
        raise ValueError("no AWS region: give region=... (--region), or set AWS_REGION, or "
                         f"a region for profile {profile or 'default'!r} in ~/.aws/config "
                         "(`aws configure set region us-east-1`)")
    architecture = architecture or prev.get("architecture") or "x86_64"
    if architecture not in ARCHITECTURES:
        raise ValueError(f"architecture {architecture!r}: use \"x86_64\" or \"arm64\"")
    memory_mb = memory_mb if memory_mb is not None else prev.get("memory_mb")
    if memory_mb is not None and (isinstance(memory_mb, bool) or not isinstance(memory_mb, int)
                                  or not 128 <= memory_mb <= 10240):
        raise ValueError(f"memory_mb must be a whole number of MB from 128 to 10240 "
                         f"(Lambda's limits): got {memory_mb!r}")
    bucket = bucket or prev.get("bucket_name")
    if bucket is not None and (not isinstance(bucket, str) or not bucket.strip()):
        raise ValueError(f"bucket must be a bucket name: got {bucket!r}")

    infra = shipped_infra()
    if infra is None:
        raise DeployError("this installation of nums_cloud carries no Terraform module: "
                          "install the wheel that scripts/wheel.sh builds, or use infra/ of "
                          "the source tree (docs/deploy.md)")
    if zip is not None:
        src = Path(zip).expanduser().resolve()
        if not src.is_file():
            raise ValueError(f"zip {str(zip)!r}: no such file")
    else:
        # This installation's zip (a newer nums_cloud updates the function), else the one
        # an earlier deploy copied there (an arm64 zip given then).
        src = shipped_zip(architecture)
        if src is None and (folder / zip_name(architecture)).is_file():
            src = folder / zip_name(architecture)
        if src is None:
            raise ValueError(
                f"no Lambda zip for {architecture}: the wheel carries bootstrap-x86_64.zip "
                f"only; build {zip_name(architecture)} with `nums-cloud package --arch "
                f"{architecture}` in the source tree (docs/deploy.md) and pass zip=... (--zip)")
    try:
        with zipfile.ZipFile(src) as z:
            if "bootstrap" not in z.namelist():
                raise ValueError(f"zip {str(src)!r} has no bootstrap at its root: use the "
                                 "zip that `nums-cloud package` makes")
    except zipfile.BadZipFile:
        raise ValueError(f"zip {str(src)!r} is not a zip file") from None

    folder.mkdir(parents=True, exist_ok=True)
    main = (infra / ROOT_MODULE).read_text()
    if main.count(MODULE_SOURCE[0]) != 1:
        raise DeployError(f"{infra / ROOT_MODULE}: expected one module source "
                          f"{MODULE_SOURCE[0]}")
    (folder / "main.tf").write_text(main.replace(*MODULE_SOURCE))
    shutil.copytree(infra / MODULE, folder / MODULE, dirs_exist_ok=True)
    dst = folder / zip_name(architecture)
    if src != dst:
        shutil.copyfile(src, dst)
    # Variables the user added to the file by hand stay.
    tfvars = dict(prev, region=region, architecture=architecture, zip_path=dst.name)
    for k, v in (("profile", profile), ("bucket_name", bucket), ("memory_mb", memory_mb)):
        if v is not None:
            tfvars[k] = v
    (folder / TFVARS).write_text(json.dumps(tfvars, indent=2, sort_keys=True) + "\n")
    return tfvars


def _terraform():
    return shutil.which("terraform") or shutil.which("tofu")


def _interactive(stream):
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _run(args, folder, env):
    """Runs terraform in ``folder``: on a terminal as it is (its questions answered there),
    else its output printed line by line (a notebook shows it)."""
    if _interactive(sys.stdout) and _interactive(sys.stdin):
        return subprocess.run(args, cwd=folder, env=env).returncode
    with subprocess.Popen(args, cwd=folder, env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as p:
        for line in p.stdout:
            sys.stdout.write(line)
        return p.wait()


def deploy(folder, *, region=None, profile=None, bucket=None, memory_mb=None,
           architecture=None, zip=None, yes=False):
    """Deploys nums-cloud on AWS Lambda with Terraform, from the files the wheel carries:
    writes infra/'s Terraform (the bucket, the function, its role and log group, the
    driver's policy; docs/deploy.md) and the Lambda zip to ``folder``, runs ``terraform
    init`` and ``terraform apply`` there, and saves ``terraform output -json`` to
    ``folder/terraform-output.json``, which it returns: ``nums_cloud.init(infra=...)``
    takes it. ``terraform destroy`` in ``folder`` removes the deployment.

    Parameters
    ----------
    folder : str or Path
        A new or empty folder, or one an earlier ``deploy`` made (what it was given then
        is kept, so a second call with ``memory_mb=`` alone changes only the memory).
        Terraform keeps the deployment's state there: keep the folder.
    region : str, optional
        Default: ``AWS_REGION``, ``AWS_DEFAULT_REGION``, else the profile's ``region`` in
        ``~/.aws/config``.
    profile : str, optional
        The AWS profile to deploy with. Default: ``AWS_PROFILE``, else the default chain.
        ``init(infra=...)`` uses it when ``AWS_PROFILE`` is not set.
    bucket : str, optional
        The bucket to create (globally unique). Default: ``nums-cloud-ACCOUNT-REGION``.
    memory_mb : int, optional
        Memory of one invocation (128 to 10240; default 2048).
    architecture : {"x86_64", "arm64"}, optional
        Default x86_64, whose zip the wheel carries; arm64 needs ``zip=``.
    zip : str or Path, optional
        The Lambda zip (``nums-cloud package --arch ARCH``); default: the wheel's.
    yes : bool
        Apply without asking (``terraform apply -auto-approve``); needed where standard
        input is not a terminal (a notebook).

    Without terraform (or OpenTofu) on the PATH, raises :class:`DeployError` saying how
    to install it, with the folder ready for ``terraform init && terraform apply``.
    """
    folder = Path(folder).expanduser().resolve()
    tfvars = prepare(folder, region=region, profile=profile, bucket=bucket,
                     memory_mb=memory_mb, architecture=architecture, zip=zip)
    # Shell commands to copy: a folder with spaces quoted.
    sh = shlex.quote(str(folder))
    then = (f"cd {sh} && terraform init && terraform apply && "
            f"terraform output -json > {OUTPUTS}")
    tf = _terraform()
    if tf is None:
        raise DeployError(
            "terraform is not on the PATH: install Terraform 1.5 or later "
            "(https://developer.hashicorp.com/terraform/install; or OpenTofu) and deploy "
            f"again, or run it yourself: {folder} holds the deployment ({then})")
    if not yes and not (_interactive(sys.stdin) and _interactive(sys.stdout)):
        raise DeployError(
            "terraform apply asks before it creates anything, and there is no terminal to "
            f"ask on: pass yes=True (--yes) to apply without asking, or run it yourself "
            f"({then})")
    env = dict(os.environ, AWS_REGION=tfvars["region"])
    if tfvars.get("profile"):
        env["AWS_PROFILE"] = tfvars["profile"]
    steps = ([tf, "init", "-input=false"],
             [tf, "apply", "-input=false", "-auto-approve"] if yes else [tf, "apply"])
    for args in steps:
        code = _run(args, folder, env)
        if code != 0:
            raise DeployError(f"`terraform {args[1]}` failed (exit {code}) in {folder}: see "
                              "its messages above; deploy again once fixed")
    out = subprocess.run([tf, "output", "-json"], cwd=folder, env=env, capture_output=True,
                         text=True)
    try:
        outputs = json.loads(out.stdout) if out.returncode == 0 else None
    except ValueError:
        outputs = None
    if not isinstance(outputs, dict) or "function_name" not in outputs:
        raise DeployError(f"`terraform output -json` in {folder} gave no function_name "
                          f"(exit {out.returncode}): {out.stderr.strip()[-2000:]}")
    path = folder / OUTPUTS
    path.write_text(json.dumps(outputs, indent=2, sort_keys=True) + "\n")
    print(f"nums-cloud is deployed: function {_outputs_value(outputs, 'function_name')}, "
          f"storage {_outputs_value(outputs, 'storage_url')}, region "
          f"{_outputs_value(outputs, 'region')}.\n"
          f"  Python:    nums_cloud.init(infra={str(path)!r})\n"
          f"  job files: nums-cloud run job.toml --infra {shlex.quote(str(path))}\n"
          f"  remove it: cd {sh} && terraform destroy")
    return path
