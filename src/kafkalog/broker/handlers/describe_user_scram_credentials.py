"""DescribeUserScramCredentials (50), v0 (Kafka's ``handleDescribeUserScramCredentialsRequest`` over
``ScramImage.describe``): each asked user's SCRAM mechanisms and iteration counts — never a salt or
a key; every user when the request names none.

Needs DESCRIBE on the cluster: otherwise the response's error is CLUSTER_AUTHORIZATION_FAILED, and
so is each named user's, whose name Kafka does not repeat
(``DescribeUserScramCredentialsRequest.getErrorResponse``; its default message is dropped)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import AclOperation
from kafkalog.broker.auth_helper import authorize_cluster
from kafkalog.broker.handlers import component, handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.broker.scram_credential_store import SCRAM_CREDENTIALS, ScramCredentialStore
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type


@handles(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0)
async def handle_describe_user_scram_credentials_request(
    apis: Any, request: RequestContext, body: Any
) -> Any:
    cls = response_type(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, request.api_version)
    result_cls = nested_type(cls, "DescribeUserScramCredentialsResult")
    info_cls = nested_type(cls, "CredentialInfo")
    if not authorize_cluster(apis, request, AclOperation.DESCRIBE):
        denied = ErrorCode.cluster_authorization_failed
        # Kafka fails on a null list here (no answer at all); kafkalog answers it as an empty one.
        refused = tuple(
            build(result_cls, user="", error_code=denied, error_message=None, credential_infos=())
            for _ in body.users or ()
        )
        return build(cls, throttle_time=ZERO_DELAY, error_code=denied, error_message=None, results=refused)
    store: ScramCredentialStore = component(apis, SCRAM_CREDENTIALS)
    users = None if body.users is None else [u.name for u in body.users]
    results = tuple(
        build(
            result_cls,
            user=r.user,
            error_code=r.error,
            error_message=r.message,
            credential_infos=tuple(build(info_cls, mechanism=m, iterations=i) for m, i in r.credentials),
        )
        for r in store.describe(users)
    )
    return build(
        cls, throttle_time=ZERO_DELAY, error_code=ErrorCode.none, error_message=None, results=results
    )
