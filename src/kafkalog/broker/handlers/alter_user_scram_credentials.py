"""AlterUserScramCredentials (51), v0 (Kafka's ``ScramControlManager.alterCredentials``): add,
replace or delete users' SCRAM credentials. The client sends the salt and the salted password (never
the password); the broker keeps StoredKey and ServerKey derived from them, persisted before it
answers, so the user can log in on any SASL listener that enables the mechanism at once.

Needs ALTER on the cluster: otherwise nothing changes and each user named, once, in name order,
gets CLUSTER_AUTHORIZATION_FAILED (``AlterUserScramCredentialsRequest.getErrorResponse``)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import AclOperation
from kafkalog.broker.auth_helper import authorize_cluster, not_authorized_message
from kafkalog.broker.handlers import component, handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.broker.scram_credential_store import (
    SCRAM_CREDENTIALS,
    ScramCredentialStore,
    ScramDeletion,
    ScramUpsertion,
)
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type


@handles(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 0)
async def handle_alter_user_scram_credentials_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, request.api_version)
    result_cls = nested_type(cls, "AlterUserScramCredentialsResult")
    if not authorize_cluster(apis, request, AclOperation.ALTER):
        message = not_authorized_message(request)
        users = sorted({c.name for c in (*body.deletions, *body.upsertions)})
        refused = tuple(
            build(
                result_cls, user=u, error_code=ErrorCode.cluster_authorization_failed, error_message=message
            )
            for u in users
        )
        return build(cls, throttle_time=ZERO_DELAY, results=refused)
    store: ScramCredentialStore = component(apis, SCRAM_CREDENTIALS)
    results = store.alter(
        [ScramDeletion(d.name, int(d.mechanism)) for d in body.deletions],
        [
            ScramUpsertion(
                u.name, int(u.mechanism), int(u.iterations), bytes(u.salt), bytes(u.salted_password)
            )
            for u in body.upsertions
        ],
    )
    return build(
        cls,
        throttle_time=ZERO_DELAY,
        results=tuple(
            build(result_cls, user=r.user, error_code=r.error, error_message=r.message) for r in results
        ),
    )
