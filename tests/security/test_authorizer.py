"""The authorizer's matching rules (Kafka's StandardAuthorizer) and the ACL store, without sockets."""

from __future__ import annotations

import json

import pytest

from broker.config import Config, ConfigError
from broker.security.acl_store import FILE, AclStore, AclStoreError
from broker.security.authorizer import (
    ALL,
    ALLOW,
    ALTER,
    ALTER_CONFIGS,
    CLUSTER,
    CLUSTER_ACTION,
    CLUSTER_NAME,
    CREATE,
    DELETE,
    DENY,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    GROUP,
    IDEMPOTENT_WRITE,
    LITERAL,
    OP_ANY,
    PERM_ANY,
    PREFIXED,
    PT_ANY,
    PT_MATCH,
    READ,
    RT_ANY,
    TOPIC,
    TRANSACTIONAL_ID,
    WRITE,
    AclBinding,
    AclFilter,
    Authorizer,
    parse_super_users,
    validate_new_acl,
)

ALICE, BOB = "User:alice", "User:bob"
HOST = "10.0.0.1"


def acl(name, op, perm=ALLOW, principal=ALICE, host="*", rtype=TOPIC, pattern=LITERAL) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def authz(*acls: AclBinding, **kw) -> Authorizer:
    a = Authorizer(**kw)
    a.replace(acls)
    return a


def test_an_allow_acl_allows_only_its_principal_operation_and_resource():
    a = authz(acl("orders", READ))
    assert a.authorize(ALICE, HOST, READ, TOPIC, "orders")
    assert not a.authorize(BOB, HOST, READ, TOPIC, "orders")
    assert not a.authorize(ALICE, HOST, WRITE, TOPIC, "orders")
    assert not a.authorize(ALICE, HOST, READ, TOPIC, "orders2")
    assert not a.authorize(ALICE, HOST, READ, GROUP, "orders")


@pytest.mark.parametrize("op", [READ, WRITE, DELETE, ALTER, DESCRIBE])
def test_read_write_delete_alter_imply_describe(op):
    a = authz(acl("t", op))
    assert a.authorize(ALICE, HOST, DESCRIBE, TOPIC, "t")


@pytest.mark.parametrize("op", [CREATE, DESCRIBE_CONFIGS, ALTER_CONFIGS, CLUSTER_ACTION])
def test_other_operations_do_not_imply_describe(op):
    assert not authz(acl("t", op)).authorize(ALICE, HOST, DESCRIBE, TOPIC, "t")


def test_alter_configs_implies_describe_configs_but_not_the_reverse():
    assert authz(acl("t", ALTER_CONFIGS)).authorize(ALICE, HOST, DESCRIBE_CONFIGS, TOPIC, "t")
    assert not authz(acl("t", DESCRIBE_CONFIGS)).authorize(ALICE, HOST, ALTER_CONFIGS, TOPIC, "t")
    assert not authz(acl("t", WRITE)).authorize(ALICE, HOST, DESCRIBE_CONFIGS, TOPIC, "t")


def test_describe_does_not_imply_read():
    assert not authz(acl("t", DESCRIBE)).authorize(ALICE, HOST, READ, TOPIC, "t")


def test_a_deny_implies_nothing_but_its_own_operation():
    a = authz(acl("t", READ), acl("t", DESCRIBE), acl("t", READ, DENY))
    assert not a.authorize(ALICE, HOST, READ, TOPIC, "t")
    assert a.authorize(ALICE, HOST, DESCRIBE, TOPIC, "t")  # a DENY of READ does not deny DESCRIBE


def test_all_allows_and_denies_every_operation():
    assert authz(acl("t", ALL)).authorize(ALICE, HOST, ALTER_CONFIGS, TOPIC, "t")
    a = authz(acl("t", READ), acl("t", ALL, DENY))
    assert not a.authorize(ALICE, HOST, READ, TOPIC, "t")
    assert not a.authorize(ALICE, HOST, DESCRIBE, TOPIC, "t")


def test_deny_beats_allow_whatever_the_pattern():
    a = authz(
        acl("*", READ, principal="User:*"),
        acl("secret", READ, DENY, pattern=PREFIXED),
    )
    assert a.authorize(ALICE, HOST, READ, TOPIC, "public")
    assert not a.authorize(ALICE, HOST, READ, TOPIC, "secret-plans")
    assert a.authorize(BOB, HOST, READ, TOPIC, "secret-plans")  # the DENY is alice's only


def test_prefixed_acls_apply_to_names_starting_with_the_prefix():
    a = authz(acl("app-", WRITE, pattern=PREFIXED))
    assert a.authorize(ALICE, HOST, WRITE, TOPIC, "app-orders")
    assert a.authorize(ALICE, HOST, WRITE, TOPIC, "app-")
    assert not a.authorize(ALICE, HOST, WRITE, TOPIC, "app")
    assert not a.authorize(ALICE, HOST, WRITE, TOPIC, "my-app-orders")


def test_a_literal_acl_is_not_a_prefix():
    a = authz(acl("app", WRITE))
    assert not a.authorize(ALICE, HOST, WRITE, TOPIC, "app-orders")


def test_many_prefixes_are_all_considered():
    acls = [acl(f"p{i}", READ, pattern=PREFIXED) for i in range(50)] + [
        acl("p1", READ, DENY, pattern=PREFIXED)
    ]
    a = authz(*acls)
    assert a.authorize(ALICE, HOST, READ, TOPIC, "p2x")
    assert not a.authorize(ALICE, HOST, READ, TOPIC, "p12")  # p1 (deny) is a prefix of p12


def test_wildcard_resource_and_wildcard_principal():
    a = authz(acl("*", READ, principal="User:*", rtype=GROUP))
    assert a.authorize(ALICE, HOST, READ, GROUP, "any-group")
    assert a.authorize("User:ANONYMOUS", HOST, READ, GROUP, "g")
    assert not a.authorize(ALICE, HOST, READ, TOPIC, "g")
    # a PREFIXED "*" is a prefix like any other (only names starting with '*')
    b = authz(acl("*", READ, pattern=PREFIXED))
    assert not b.authorize(ALICE, HOST, READ, TOPIC, "x")
    assert b.authorize(ALICE, HOST, READ, TOPIC, "*x")


def test_principal_types_are_part_of_the_principal():
    a = authz(acl("t", READ, principal="Group:alice"))
    assert not a.authorize(ALICE, HOST, READ, TOPIC, "t")


def test_host_matching():
    a = authz(acl("t", READ, host="10.0.0.1"), acl("t", WRITE, DENY, host="10.0.0.2"), acl("t", WRITE))
    assert a.authorize(ALICE, "10.0.0.1", READ, TOPIC, "t")
    assert not a.authorize(ALICE, "10.0.0.9", READ, TOPIC, "t")
    assert a.authorize(ALICE, "10.0.0.1", WRITE, TOPIC, "t")
    assert not a.authorize(ALICE, "10.0.0.2", WRITE, TOPIC, "t")


def test_super_users_may_do_anything_even_against_a_deny():
    a = authz(acl("t", ALL, DENY, principal="User:*"), super_users=parse_super_users("User:admin; User:ops"))
    assert a.authorize("User:admin", HOST, WRITE, TOPIC, "t")
    assert a.authorize("User:ops", HOST, ALTER, CLUSTER, CLUSTER_NAME)
    assert not a.authorize(ALICE, HOST, WRITE, TOPIC, "t")


def test_no_acl_on_a_resource_denies_unless_allow_everyone():
    assert not authz().authorize(ALICE, HOST, READ, TOPIC, "t")
    assert authz(allow_if_no_acl=True).authorize(ALICE, HOST, READ, TOPIC, "t")
    # allow.everyone applies only to resources no ACL at all applies to: bob's ACL on "t" denies alice
    a = authz(acl("t", READ, principal=BOB), allow_if_no_acl=True)
    assert not a.authorize(ALICE, HOST, READ, TOPIC, "t")
    assert a.authorize(ALICE, HOST, READ, TOPIC, "u")
    # a prefixed ACL applies too
    b = authz(acl("t", READ, principal=BOB, pattern=PREFIXED), allow_if_no_acl=True)
    assert not b.authorize(ALICE, HOST, READ, TOPIC, "tx")


def test_authorized_operations_bitfield():
    a = authz(acl("t", READ), acl("t", ALTER_CONFIGS))
    bits = a.authorized_operations(ALICE, HOST, TOPIC, "t")
    assert bits == (1 << READ) | (1 << DESCRIBE) | (1 << ALTER_CONFIGS) | (1 << DESCRIBE_CONFIGS)
    assert a.authorized_operations(BOB, HOST, TOPIC, "t") == 0


def test_authorize_any_for_idempotent_producers():
    # Kafka's authorizeByResourceType: an ALLOW somewhere not overridden by a DENY on it or its prefix
    assert authz(acl("orders", WRITE)).authorize_any(ALICE, HOST, WRITE, TOPIC)
    assert not authz(acl("orders", READ)).authorize_any(ALICE, HOST, WRITE, TOPIC)
    assert not authz(acl("orders", WRITE), acl("ord", WRITE, DENY, pattern=PREFIXED)).authorize_any(
        ALICE, HOST, WRITE, TOPIC
    )
    assert not authz(acl("orders", WRITE), acl("orders", WRITE, DENY)).authorize_any(
        ALICE, HOST, WRITE, TOPIC
    )
    assert not authz(acl("a", WRITE), acl("*", WRITE, DENY)).authorize_any(ALICE, HOST, WRITE, TOPIC)
    assert authz(acl("a", WRITE), acl("b", WRITE, DENY)).authorize_any(ALICE, HOST, WRITE, TOPIC)
    assert authz(allow_if_no_acl=True).authorize_any(ALICE, HOST, WRITE, TOPIC)
    assert authz(super_users={ALICE}).authorize_any(ALICE, HOST, IDEMPOTENT_WRITE, CLUSTER)


# ------------------------------------------------------------------------------------------ filters


def flt(rtype=RT_ANY, name=None, pattern=PT_ANY, principal=None, host=None, op=OP_ANY, perm=PERM_ANY):
    return AclFilter.of(rtype, name, pattern, principal, host, op, perm)


def test_filters_any_and_null_match_everything():
    a = acl("t", READ)
    assert flt().matches(a)
    assert flt(TOPIC, "t", LITERAL, ALICE, "*", READ, ALLOW).matches(a)
    assert not flt(GROUP).matches(a)
    assert not flt(name="u").matches(a)
    assert not flt(pattern=PREFIXED).matches(a)
    assert not flt(principal=BOB).matches(a)
    assert not flt(host=HOST).matches(a)  # a filter's host is compared as given, "*" is not a wildcard
    assert not flt(op=WRITE).matches(a)
    assert not flt(perm=DENY).matches(a)


def test_match_filters_find_every_acl_that_applies_to_a_name():
    literal, wildcard, prefix, other = (
        acl("app-orders", READ),
        acl("*", READ),
        acl("app-", READ, pattern=PREFIXED),
        acl("other", READ),
    )
    f = flt(TOPIC, "app-orders", PT_MATCH)
    assert [x for x in (literal, wildcard, prefix, other) if f.matches(x)] == [literal, wildcard, prefix]
    # ANY with a name matches that exact name of any pattern type
    assert [x for x in (literal, wildcard, prefix) if flt(TOPIC, "app-", PT_ANY).matches(x)] == [prefix]


def test_unknown_codes_read_as_unknown():
    f = flt(rtype=99)
    assert f.pattern_unknown() and not f.matches(acl("t", READ))
    assert flt(op=99).entry_unknown()


@pytest.mark.parametrize(
    ("binding", "reason"),
    [
        (AclBinding(RT_ANY, "t", LITERAL, ALICE, "*", READ, ALLOW), "Invalid resourceType ANY"),
        (AclBinding(TOPIC, "t", PT_MATCH, ALICE, "*", READ, ALLOW), "Invalid patternType MATCH"),
        (AclBinding(TOPIC, "t", LITERAL, ALICE, "*", OP_ANY, ALLOW), "Invalid operation ANY"),
        (AclBinding(TOPIC, "t", LITERAL, ALICE, "*", READ, PERM_ANY), "Invalid permissionType ANY"),
        (AclBinding(TOPIC, "", LITERAL, ALICE, "*", READ, ALLOW), "Resource name should not be empty"),
        (AclBinding(TRANSACTIONAL_ID, "tx", PREFIXED, ALICE, "*", WRITE, DENY), None),
    ],
)
def test_validation_of_new_acls(binding, reason):
    assert validate_new_acl(binding) == reason


# ------------------------------------------------------------------------------------------ store


def test_store_creates_deletes_and_replays(tmp_path):
    a = Authorizer()
    store = AclStore(tmp_path, a)
    assert store.create([acl("t", READ), acl("t", READ), acl("", READ)]) == [
        None,
        None,
        "Resource name should not be empty",
    ]
    store.create([acl("g", READ, rtype=GROUP)])
    assert store.acls == [acl("t", READ), acl("g", READ, rtype=GROUP)]  # a repeated ACL is kept once
    assert a.authorize(ALICE, HOST, READ, GROUP, "g")
    replayed = Authorizer()
    AclStore(tmp_path, replayed)
    assert list(replayed.acls) == store.acls
    results = store.delete([flt(GROUP), flt(GROUP), flt(rtype=0)])
    # as Kafka's controller: every filter sees the ACLs as they were before the request
    g = [acl("g", READ, rtype=GROUP)]
    assert results == [(None, g), (None, g), ("Unknown patternFilter.", [])]
    assert not a.authorize(ALICE, HOST, READ, GROUP, "g")
    again = Authorizer()
    AclStore(tmp_path, again)
    assert list(again.acls) == [acl("t", READ)]
    assert not (tmp_path / (FILE + ".tmp")).exists()


def test_a_damaged_acl_file_stops_the_start(tmp_path):
    (tmp_path / FILE).write_text("{not json")
    with pytest.raises(AclStoreError, match="cannot read the ACLs"):
        AclStore(tmp_path, Authorizer())
    (tmp_path / FILE).write_text(json.dumps({"version": 7, "acls": []}))
    with pytest.raises(AclStoreError, match="unknown format version"):
        AclStore(tmp_path, Authorizer())


def test_config_names_the_authorizer():
    assert Config({"authorizer.class.name": "ACL"})["authorizer.class.name"] == "acl"
    name = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    assert Config({"authorizer.class.name": name})["authorizer.class.name"] == name
    with pytest.raises(ConfigError, match="authorizer.class.name"):
        Config({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"})
    assert Config({"allow.everyone.if.no.acl.found": "true"})["allow.everyone.if.no.acl.found"] is True
