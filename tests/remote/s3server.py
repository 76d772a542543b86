#!/usr/bin/env python3
"""An S3-compatible server on 127.0.0.1 (moto's) for the remote-shard tests
(tests/cli/remote_s3.sh), with the request signatures checked.

Usage: s3server.py INFOFILE BUCKET PREFIX=DIR...

Each DIR is uploaded under the key prefix PREFIX/ of BUCKET (files of subdirectories too).
Then signature checking is switched on and INFOFILE gets three lines: the endpoint URL, an
access key id and its secret key, the only credentials the server then accepts. Runs until
killed. Needs moto[server] (tools/dev installs it into build-moto-venv/).
"""
import json
import os
import sys

import boto3
from moto import settings
from moto.core.authorization import ActionAuthenticatorMixin
from moto.server import ThreadedMotoServer


def main():
    info, bucket, uploads = sys.argv[1], sys.argv[2], sys.argv[3:]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    boot = dict(endpoint_url=endpoint, region_name="us-east-1",
                aws_access_key_id="boot", aws_secret_access_key="boot")
    iam = boto3.client("iam", **boot)
    iam.create_user(UserName="sharc")
    iam.put_user_policy(UserName="sharc", PolicyName="s3", PolicyDocument=json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
    key = iam.create_access_key(UserName="sharc")["AccessKey"]
    s3 = boto3.client("s3", **boot)
    s3.create_bucket(Bucket=bucket)
    for item in uploads:
        prefix, root = item.split("=", 1)
        for d, _, files in os.walk(root):
            for f in files:
                path = os.path.join(d, f)
                rel = os.path.relpath(path, root)
                s3.upload_file(path, bucket, f"{prefix}/{rel}")
    # From here on every request must be signed with the user's key (what moto's
    # /moto-api/reset-auth does, done in this process).
    settings.INITIAL_NO_AUTH_ACTION_COUNT = 0
    ActionAuthenticatorMixin.request_count = 0
    with open(info + ".tmp", "w") as f:
        f.write(f"{endpoint}\n{key['AccessKeyId']}\n{key['SecretAccessKey']}\n")
    os.rename(info + ".tmp", info)
    server._thread.join()


if __name__ == "__main__":
    main()
