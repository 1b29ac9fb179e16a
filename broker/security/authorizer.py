"""ACL authorization as Kafka's StandardAuthorizer decides it (``authorizer.class.name``).

The model is Kafka's: an ACL binds a resource pattern (resource type, name, LITERAL or PREFIXED) to an
entry (principal, host, operation, ALLOW or DENY). :meth:`Authorizer.authorize` answers one action
(principal, client host, operation, resource type, resource name) with Kafka's rules:

- a principal listed in ``super.users`` may do anything;
- the ACLs that apply to a resource are those on its exact name (LITERAL), on ``*`` (LITERAL) and on
  every prefix of its name (PREFIXED);
- of those, an ACL matches when its principal is the client's or ``User:*``, its host is the
  client's address or ``*``, and its operation is the action's or ALL; an ALLOW of READ, WRITE,
  DELETE or ALTER also allows DESCRIBE, and an ALLOW of ALTER_CONFIGS also allows DESCRIBE_CONFIGS
  (a DENY implies nothing);
- any matching DENY wins; else any matching ALLOW allows; else, when no ACL at all applies to the
  resource, ``allow.everyone.if.no.acl.found`` decides (default false: denied); else denied.

The ACLs live in :class:`broker.security.acl_store.AclStore` (the data directory). This module does
no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

# ResourceType codes
RT_UNKNOWN, RT_ANY, TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER = range(8)
# PatternType codes
PT_UNKNOWN, PT_ANY, PT_MATCH, LITERAL, PREFIXED = range(5)
# AclOperation codes
OP_UNKNOWN, OP_ANY, ALL = 0, 1, 2
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12
CREATE_TOKENS, DESCRIBE_TOKENS, TWO_PHASE_COMMIT = 13, 14, 15
# AclPermissionType codes
PERM_UNKNOWN, PERM_ANY, DENY, ALLOW = range(4)

#: The only name of the CLUSTER resource.
CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"

#: Kafka's class name of its (KRaft) authorizer, and this broker's short name for it.
AUTHORIZER_CLASS_NAMES = ("org.apache.kafka.metadata.authorizer.StandardAuthorizer", "acl")

RESOURCE_TYPE_NAMES = {
    RT_UNKNOWN: "UNKNOWN",
    RT_ANY: "ANY",
    TOPIC: "TOPIC",
    GROUP: "GROUP",
    CLUSTER: "CLUSTER",
    TRANSACTIONAL_ID: "TRANSACTIONAL_ID",
    DELEGATION_TOKEN: "DELEGATION_TOKEN",
    USER: "USER",
}
PATTERN_TYPE_NAMES = {
    PT_UNKNOWN: "UNKNOWN",
    PT_ANY: "ANY",
    PT_MATCH: "MATCH",
    LITERAL: "LITERAL",
    PREFIXED: "PREFIXED",
}
OPERATION_NAMES = {
    OP_UNKNOWN: "UNKNOWN",
    OP_ANY: "ANY",
    ALL: "ALL",
    READ: "READ",
    WRITE: "WRITE",
    CREATE: "CREATE",
    DELETE: "DELETE",
    ALTER: "ALTER",
    DESCRIBE: "DESCRIBE",
    CLUSTER_ACTION: "CLUSTER_ACTION",
    DESCRIBE_CONFIGS: "DESCRIBE_CONFIGS",
    ALTER_CONFIGS: "ALTER_CONFIGS",
    IDEMPOTENT_WRITE: "IDEMPOTENT_WRITE",
    CREATE_TOKENS: "CREATE_TOKENS",
    DESCRIBE_TOKENS: "DESCRIBE_TOKENS",
    TWO_PHASE_COMMIT: "TWO_PHASE_COMMIT",
}
PERMISSION_NAMES = {PERM_UNKNOWN: "UNKNOWN", PERM_ANY: "ANY", DENY: "DENY", ALLOW: "ALLOW"}

#: ALLOW ACLs of these operations also allow DESCRIBE, resp. DESCRIBE_CONFIGS (Kafka's implications).
IMPLIES_DESCRIBE = frozenset({DESCRIBE, READ, WRITE, DELETE, ALTER})
IMPLIES_DESCRIBE_CONFIGS = frozenset({DESCRIBE_CONFIGS, ALTER_CONFIGS})

#: The operations that apply to each resource type (Kafka's AclEntry.supportedOperations): what the
#: authorized-operations bitfields of Metadata, DescribeGroups and DescribeCluster are made of.
SUPPORTED_OPERATIONS: dict[int, tuple[int, ...]] = {
    TOPIC: (READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS),
    GROUP: (READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS),
    CLUSTER: (CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER, DESCRIBE),
    TRANSACTIONAL_ID: (DESCRIBE, WRITE, TWO_PHASE_COMMIT),
    DELEGATION_TOKEN: (DESCRIBE,),
    USER: (CREATE_TOKENS, DESCRIBE_TOKENS),
}


def _known(code: int, names: dict[int, str]) -> int:
    """A code as Kafka's ``fromCode`` reads it: an unknown one is UNKNOWN (0)."""
    return code if code in names else 0


class AclBinding(NamedTuple):
    """One ACL: (resource type, resource name, pattern type) and (principal, host, operation,
    permission), with Kafka's codes."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int

    def describe(self) -> str:
        return (
            f"(pattern=ResourcePattern(resourceType={RESOURCE_TYPE_NAMES.get(self.resource_type)}, "
            f"name={self.resource_name}, patternType={PATTERN_TYPE_NAMES.get(self.pattern_type)}), "
            f"entry=(principal={self.principal}, host={self.host}, "
            f"operation={OPERATION_NAMES.get(self.operation)}, "
            f"permissionType={PERMISSION_NAMES.get(self.permission)}))"
        )


class AclFilter(NamedTuple):  # not a dataclass: see broker.config.Setting
    """Kafka's AclBindingFilter: None (name, principal, host) and ANY codes match anything; a MATCH
    pattern type matches every pattern that applies to the name (LITERAL equal or ``*``, PREFIXED
    prefix of it)."""

    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission: int

    @classmethod
    def of(
        cls,
        resource_type: int,
        resource_name: str | None,
        pattern_type: int,
        principal: str | None,
        host: str | None,
        operation: int,
        permission: int,
    ) -> AclFilter:
        """A filter from wire codes (unknown codes become UNKNOWN, as Kafka reads them)."""
        return cls(
            _known(resource_type, RESOURCE_TYPE_NAMES),
            resource_name,
            _known(pattern_type, PATTERN_TYPE_NAMES),
            principal,
            host,
            _known(operation, OPERATION_NAMES),
            _known(permission, PERMISSION_NAMES),
        )

    def pattern_unknown(self) -> bool:
        return self.resource_type == RT_UNKNOWN or self.pattern_type == PT_UNKNOWN

    def entry_unknown(self) -> bool:
        return self.operation == OP_UNKNOWN or self.permission == PERM_UNKNOWN

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type != RT_ANY and self.resource_type != acl.resource_type:
            return False
        pt = self.pattern_type
        if pt not in (PT_ANY, PT_MATCH) and pt != acl.pattern_type:
            return False
        name = self.resource_name
        if name is not None:
            if pt == PT_ANY or pt == acl.pattern_type:
                if name != acl.resource_name:
                    return False
            elif acl.pattern_type == LITERAL:  # MATCH
                if name != acl.resource_name and acl.resource_name != WILDCARD:
                    return False
            elif acl.pattern_type == PREFIXED:
                if not name.startswith(acl.resource_name):
                    return False
            else:
                return False
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation != OP_ANY and self.operation != acl.operation:
            return False
        return self.permission == PERM_ANY or self.permission == acl.permission


def validate_new_acl(acl: AclBinding) -> str | None:
    """Why Kafka's controller refuses to create ``acl`` (INVALID_REQUEST), or None."""
    if acl.resource_type in (RT_UNKNOWN, RT_ANY) or acl.resource_type not in RESOURCE_TYPE_NAMES:
        return f"Invalid resourceType {RESOURCE_TYPE_NAMES.get(acl.resource_type, 'UNKNOWN')}"
    if acl.pattern_type not in (LITERAL, PREFIXED):
        return f"Invalid patternType {PATTERN_TYPE_NAMES.get(acl.pattern_type, 'UNKNOWN')}"
    if acl.operation in (OP_UNKNOWN, OP_ANY) or acl.operation not in OPERATION_NAMES:
        return f"Invalid operation {OPERATION_NAMES.get(acl.operation, 'UNKNOWN')}"
    if acl.permission not in (DENY, ALLOW):
        return f"Invalid permissionType {PERMISSION_NAMES.get(acl.permission, 'UNKNOWN')}"
    if not acl.resource_name:
        return "Resource name should not be empty"
    return None


def _decide(acl: AclBinding, principals: tuple[str, str], host: str, op: int) -> int:
    """ALLOW, DENY or 0 (this ACL says nothing about the action): Kafka's findResult."""
    if acl.principal not in principals:
        return 0
    if acl.host != WILDCARD and acl.host != host:
        return 0
    if acl.operation != ALL:
        if acl.permission == ALLOW:
            if op == DESCRIBE:
                if acl.operation not in IMPLIES_DESCRIBE:
                    return 0
            elif op == DESCRIBE_CONFIGS:
                if acl.operation not in IMPLIES_DESCRIBE_CONFIGS:
                    return 0
            elif op != acl.operation:
                return 0
        elif op != acl.operation:
            return 0
    return acl.permission


def parse_super_users(text: str) -> frozenset[str]:
    """``super.users``: principals separated by ``;`` (Kafka's syntax, ``User:admin;User:ops``)."""
    return frozenset(p.strip() for p in text.split(";") if p.strip())


class Authorizer:
    """Decides actions from the ACLs it holds (load them with :meth:`replace`; the store keeps it
    in step). Lookups go through an index by (resource type, pattern type)."""

    def __init__(self, super_users: Iterable[str] = (), allow_if_no_acl: bool = False):
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        #: every ACL, in creation order (a dict as an ordered set)
        self.acls: dict[AclBinding, None] = {}
        #: (resource type, LITERAL) -> name -> ACLs; (resource type, PREFIXED) -> prefix -> ACLs
        self._index: dict[tuple[int, int], dict[str, list[AclBinding]]] = {}

    def replace(self, acls: Iterable[AclBinding]) -> None:
        self.acls = dict.fromkeys(acls)
        index: dict[tuple[int, int], dict[str, list[AclBinding]]] = {}
        for acl in self.acls:
            index.setdefault((acl.resource_type, acl.pattern_type), {}).setdefault(
                acl.resource_name, []
            ).append(acl)
        self._index = index

    def _applicable(self, resource_type: int, name: str) -> list[AclBinding]:
        out: list[AclBinding] = []
        literal = self._index.get((resource_type, LITERAL))
        if literal:
            out += literal.get(name, ())
            if name != WILDCARD:
                out += literal.get(WILDCARD, ())
        prefixed = self._index.get((resource_type, PREFIXED))
        if prefixed:
            if len(prefixed) < len(name):
                for prefix, acls in prefixed.items():
                    if name.startswith(prefix):
                        out += acls
            else:
                for i in range(1, len(name) + 1):
                    acls = prefixed.get(name[:i])
                    if acls:
                        out += acls
        return out

    def authorize(self, principal: str, host: str, op: int, resource_type: int, name: str) -> bool:
        """May ``principal`` connecting from ``host`` do ``op`` on the resource? (Kafka's rules, see
        the module's documentation.)"""
        if principal in self.super_users:
            return True
        acls = self._applicable(resource_type, name)
        if not acls:
            return self.allow_if_no_acl
        principals = (principal, WILDCARD_PRINCIPAL)
        allowed = False
        for acl in acls:
            result = _decide(acl, principals, host, op)
            if result == DENY:
                return False
            if result == ALLOW:
                allowed = True
        return allowed

    def authorized_operations(self, principal: str, host: str, resource_type: int, name: str) -> int:
        """The KIP-430 bitfield: bit ``op`` set for each supported operation allowed on the resource."""
        bits = 0
        for op in SUPPORTED_OPERATIONS[resource_type]:
            if self.authorize(principal, host, op, resource_type, name):
                bits |= 1 << op
        return bits

    def authorize_any(self, principal: str, host: str, op: int, resource_type: int) -> bool:
        """May the principal do ``op`` on some resource of the type? Kafka's
        authorizeByResourceType (InitProducerId allows an idempotent producer with WRITE on any
        topic): an ALLOW not overridden by a DENY on the same literal name or on a prefix of it."""
        if self.authorize(principal, host, op, resource_type, "hardcode"):
            return True
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allow: list[AclBinding] = []
        for acl in self.acls:
            if acl.resource_type != resource_type:
                continue
            if acl.host != host and acl.host != WILDCARD:
                continue
            if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
                continue
            if acl.operation != op and acl.operation != ALL:
                continue
            if acl.permission == DENY:
                if acl.pattern_type == LITERAL:
                    if acl.resource_name == WILDCARD:
                        return False
                    deny_literal.add(acl.resource_name)
                else:
                    deny_prefixed.add(acl.resource_name)
            elif acl.permission == ALLOW:
                if acl.pattern_type == LITERAL and acl.resource_name == WILDCARD:
                    return True
                allow.append(acl)
        for acl in allow:
            if acl.pattern_type == LITERAL and acl.resource_name in deny_literal:
                continue
            name = acl.resource_name
            if not any(name[:i] in deny_prefixed for i in range(1, len(name) + 1)):
                return True
        return False
