"""Signed linked-data provenance envelopes (Kleedorfer et al., "Verifiability and Traceability
in a Linked Data Based Messaging System"), without blank nodes.

Theory of operation
-------------------
A dissemination message is an RDF dataset of named graphs only:

* ``<M#c1>`` — content: document id, publisher, the root and leaf count of the publisher's
  signed Merkle manifest (which binds every fragment's headers and ciphertext digest; never
  plaintext), so the content graph has the same small size whatever the document;
* ``<M#eN>`` — one envelope per hop: sender, recipient, timestamp, the manifest leaves it
  carries as ranges (``xdn:carriesLeaves``, :class:`LeafRanges`); from the second hop on it
  ``msg:containsEnvelope`` the previous envelope and references that envelope's signature *and
  signature value* (``<M#eN-ref1>`` — a hash URI where the paper has a blank node), so the
  signatures chain;
* ``<GRAPHs>`` — the signature of graph ``<GRAPH>``: signer node URI, the signer's certificate,
  signing method, base64 ECDSA signature over the graph's RDFC-1.0 canonical
  N-Quads, or over the Merkle root of a batch of such graphs with the graph's inclusion path
  (:func:`relay_many`; :func:`relay_fanout` for a site's fan-out to many destinations).

Message URIs are minted as ``<node_uri>msg/<document_id>/<hop id>`` by the node adding the
hop (:func:`message_uri`: every part percent-encoded as one path segment, :mod:`xdn.ids`, so a
document id such as ``order 7``, ``café`` or ``a/b`` makes a valid IRI; the id itself travels
unescaped as the ``xdn:documentId`` literal). Building a :class:`Message` checks
well-formedness (paper conditions 1 to 8, 10, 11); :func:`verify_message` (keys given) and
:class:`ChainVerifier` (keys from the carried certificates, checked against the CA) check
condition 9 and every signature (Algorithm 2). Errors name the graph at fault. Fan-out is one
relayed message per downlink, each with its own URI; the audit (``audit/``) rebuilds the tree
from the nodes' :class:`ProvenanceLog` files.

A party that refuses something signs a *failure notice* (:func:`failure_notice`): a message of
its own whose content graph (:class:`RefusalFacts`) names what was refused and why, wrapped in
one ``xdn:Refusal`` envelope and minted below the signer's ``refusal/`` space
(:func:`notice_uri`); it is checked and verified like every other message and appended to the
signer's log, so the audit sees every refusal.

A publisher whose new policy version changes what it grants a subscriber signs a
*policy-change notice* for it (:func:`policy_notice`, :class:`PolicyChangeFacts`): the same
one-hop shape, an ``xdn:PolicyNotice`` envelope over an ``xdn:PolicyChange`` content graph,
minted below the publisher's ``policy/`` space (:func:`policy_notice_uri`); it travels with the
entitlement it accompanies (:mod:`xdn.policy_notices`).
"""

from xdn.provenance._batch import MAX_BATCH, BatchProof
from xdn.provenance._facts import (
    KEY_MESSAGE_KINDS,
    REFUSAL_KINDS,
    ContentFacts,
    PolicyChangeFacts,
    RefusalFacts,
    Signer,
)
from xdn.provenance._fanout import RelayedHops, relay_fanout
from xdn.provenance._graphs import (
    EnvelopeInfo,
    Reference,
    SignatureInfo,
    graph_type,
    read_content,
    read_envelope,
    read_signature,
)
from xdn.provenance._leaves import LeafRanges
from xdn.provenance._log import ProvenanceLog, node_description, read_node_description
from xdn.provenance._message import (
    MAX_CHAIN_BYTES,
    Hop,
    Message,
    check_extendable,
    originate,
    receipt,
    relay,
    relay_many,
    signing_input,
)
from xdn.provenance._notice import failure_notice
from xdn.provenance._policy import policy_notice
from xdn.provenance._policy_graph import read_policy_change
from xdn.provenance._refusal import read_refusal
from xdn.provenance._shape import message_uri, notice_uri, policy_notice_uri
from xdn.provenance._switch import SWITCH, enabled
from xdn.provenance._verify import ChainVerifier, VerifiedChain, verify_message

__all__ = [
    "KEY_MESSAGE_KINDS",
    "MAX_BATCH",
    "MAX_CHAIN_BYTES",
    "REFUSAL_KINDS",
    "SWITCH",
    "BatchProof",
    "ChainVerifier",
    "ContentFacts",
    "EnvelopeInfo",
    "Hop",
    "LeafRanges",
    "Message",
    "PolicyChangeFacts",
    "ProvenanceLog",
    "Reference",
    "RefusalFacts",
    "RelayedHops",
    "SignatureInfo",
    "Signer",
    "VerifiedChain",
    "check_extendable",
    "enabled",
    "failure_notice",
    "graph_type",
    "message_uri",
    "node_description",
    "notice_uri",
    "originate",
    "policy_notice",
    "policy_notice_uri",
    "read_content",
    "read_envelope",
    "read_node_description",
    "read_policy_change",
    "read_refusal",
    "read_signature",
    "receipt",
    "relay",
    "relay_fanout",
    "relay_many",
    "signing_input",
    "verify_message",
]
