"""Authorized-operations bitfields (KIP-430). There is no authorizer: every client may do everything,
so a bitfield lists every operation that applies to the resource type, as Kafka does without ACLs.
"""

from __future__ import annotations

# AclOperation codes
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12
CREATE_TOKENS, DESCRIBE_TOKENS = 13, 14

#: Kafka's value for "authorized operations were not requested".
NOT_REQUESTED = -(2**31)


def _bits(*ops: int) -> int:
    v = 0
    for op in ops:
        v |= 1 << op
    return v


TOPIC_OPS = _bits(READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS)
#: Kafka 4 adds the group configs (KIP-848) to READ, DELETE and DESCRIBE
GROUP_OPS = _bits(READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS)
CLUSTER_OPS = _bits(
    CREATE,
    ALTER,
    DESCRIBE,
    CLUSTER_ACTION,
    DESCRIBE_CONFIGS,
    ALTER_CONFIGS,
    IDEMPOTENT_WRITE,
)  # as Kafka's AclEntry.supportedOperations(CLUSTER): the token operations belong to users
