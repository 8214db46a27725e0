"""``python -m nums_cloud deploy FOLDER``: deploys nums-cloud on AWS Lambda from what the
wheel carries (``nums_cloud.deploy``; docs/deploy.md, "From Python")."""

import argparse
import sys

from . import _deploy


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m nums_cloud")
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser(
        "deploy", help="deploy on AWS Lambda with Terraform",
        description=(_deploy.deploy.__doc__ or "").split("\n\n")[0].replace("``", "`"))
    d.add_argument("folder", help="where the Terraform, the zip and its state go (keep it)")
    d.add_argument("--region", help="default: AWS_REGION, AWS_DEFAULT_REGION, the profile's")
    d.add_argument("--profile", help="the AWS profile; default: AWS_PROFILE")
    d.add_argument("--bucket", help="the bucket to create; default: nums-cloud-ACCOUNT-REGION")
    d.add_argument("--memory-mb", type=int, help="memory of one invocation (default 2048)")
    d.add_argument("--arch", choices=_deploy.ARCHITECTURES, dest="architecture",
                   help="default x86_64 (the zip the wheel carries)")
    d.add_argument("--zip", help="the Lambda zip (nums-cloud package); default: the wheel's")
    d.add_argument("--yes", action="store_true", help="apply without asking")
    a = vars(p.parse_args(argv))
    a.pop("command")
    try:
        _deploy.deploy(a.pop("folder"), **a)
    except (_deploy.DeployError, ValueError) as e:
        print(f"nums_cloud deploy: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
