"""Ontology-based authorization policies: documents, signing, the decision procedure, the engine.

A policy is a TOML document an administrator edits and the publisher signs (see
``docs/policies.md`` for the format, the rule kinds and their precedence). This package reads
and validates policies (:func:`load_policy`, :func:`parse_policy`), signs and verifies them
(:func:`sign_policy`, :func:`load_signed_policy`), decides what a credential may receive
(:func:`auth_list`, a pure function with an explanation), keeps the set of policies a
disseminator enforces (:class:`PolicySet`), and runs them for live subscriptions with caching
and incremental re-evaluation (:class:`PolicyEngine`, whose operations return a
:class:`ChangeSet` of concepts gained and lost). The implementation lives in private modules;
this module is the public API.
"""

from xdn.policy._changes import Change, ChangeSet, Reason, SubscriberChange
from xdn.policy._compiled import ConceptSet
from xdn.policy._consistency import check_rules, revalidate
from xdn.policy._diff import Impact, RuleDiff, impacts, representatives, rule_diff
from xdn.policy._engine import PolicyEngine
from xdn.policy._evaluate import auth_list
from xdn.policy._model import (
    NAME_FIELDS,
    ROLES,
    After,
    Authorization,
    Condition,
    Effect,
    Grant,
    Policy,
    Rule,
)
from xdn.policy._parse import load_policy, parse_policy
from xdn.policy._policyset import PolicySet
from xdn.policy._signing import (
    load_signed_policy,
    sign_policy,
    signature_path,
    verify_policy_file,
)

__all__ = [
    "NAME_FIELDS",
    "ROLES",
    "After",
    "Authorization",
    "Change",
    "ChangeSet",
    "ConceptSet",
    "Condition",
    "Effect",
    "Grant",
    "Impact",
    "Policy",
    "PolicyEngine",
    "PolicySet",
    "Reason",
    "Rule",
    "RuleDiff",
    "SubscriberChange",
    "auth_list",
    "check_rules",
    "impacts",
    "load_policy",
    "load_signed_policy",
    "parse_policy",
    "representatives",
    "revalidate",
    "rule_diff",
    "sign_policy",
    "signature_path",
    "verify_policy_file",
]
