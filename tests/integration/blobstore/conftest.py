from tests.s3fixtures import s3_bucket, s3_server  # noqa: F401
