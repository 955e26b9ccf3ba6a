"""Vocabulary of provenance envelopes: the paper's ``msg:``/``sig:``/``rdfg:`` plus ``xdn:``."""

from __future__ import annotations

from typing import Final

from xdn.rdf import IRI

MSG: Final = "http://purl.org/webofneeds/message#"
SIG: Final = "http://icp.it-risk.iwvi.uni-koblenz.de/ontologies/signature.owl#"
RDFG: Final = "http://www.w3.org/2004/03/trix/rdfg-1/"
XDN: Final = "https://xdn.example.org/ns#"
RDF: Final = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
XSD: Final = "http://www.w3.org/2001/XMLSchema#"

RDF_TYPE: Final = IRI(RDF + "type")
XSD_LONG: Final = XSD + "long"
XSD_BOOLEAN: Final = XSD + "boolean"
XSD_HEX: Final = XSD + "hexBinary"
XSD_BASE64: Final = XSD + "base64Binary"

# envelopes (the paper's Listing 1)
ENVELOPE_GRAPH: Final = IRI(MSG + "EnvelopeGraph")
SUB_GRAPH_OF: Final = IRI(RDFG + "subGraphOf")
CONTAINS_ENVELOPE: Final = IRI(MSG + "containsEnvelope")
HAS_CONTENT: Final = IRI(MSG + "hasContent")
HAS_MESSAGE_TYPE: Final = IRI(MSG + "hasMessageType")
HAS_SENDER: Final = IRI(MSG + "hasSender")
HAS_RECIPIENT: Final = IRI(MSG + "hasRecipient")
HAS_SENT_TIMESTAMP: Final = IRI(MSG + "hasSentTimestamp")
HAS_RECEIVED_TIMESTAMP: Final = IRI(MSG + "hasReceivedTimestamp")
HAS_REMOTE_MESSAGE: Final = IRI(MSG + "hasRemoteMessage")
#: On a publication: the message of the same document's previous version (versions are linked).
HAS_PREVIOUS_MESSAGE: Final = IRI(MSG + "hasPreviousMessage")
REFERENCES_SIGNATURE: Final = IRI(MSG + "referencesSignature")
HAS_SIGNATURE_GRAPH: Final = IRI(MSG + "hasSignatureGraph")
HAS_SIGNED_GRAPH: Final = IRI(MSG + "hasSignedGraph")

# signatures
SIGNATURE: Final = IRI(SIG + "Signature")
HAS_SIGNATURE_VALUE: Final = IRI(SIG + "hasSignatureValue")
HAS_VERIFICATION_CERTIFICATE: Final = IRI(SIG + "hasVerificationCertificate")
HAS_GRAPH_SIGNING_METHOD: Final = IRI(SIG + "hasGraphSigningMethod")
#: RDFC-1.0 canonical N-Quads of the signed graph, ECDSA with the hash of the signer
#: certificate's curve (P-256 / SHA-256, P-384 / SHA-384), DER, base64.
SIGNING_METHOD: Final = IRI(XDN + "Rdfc10Ecdsa")
#: A batch signature: ECDSA (hash as above) over the RFC 9162 Merkle root of a batch whose
#: leaves are the signed graphs' RDFC-1.0 canonical N-Quads; the graph's signature carries its
#: leaf index, the batch size and the inclusion path (:mod:`._batch`).
BATCH_SIGNING_METHOD: Final = IRI(XDN + "Rdfc10MerkleBatchEcdsa")
#: The signer's X.509 certificate (DER, base64): a verifier needs only the message and the CA.
SIGNER_CERTIFICATE: Final = IRI(XDN + "signerCertificate")
BATCH_INDEX: Final = IRI(XDN + "batchIndex")
BATCH_SIZE: Final = IRI(XDN + "batchSize")
#: The inclusion path of a batch leaf: the sibling hashes from the leaf up, hex, space-separated.
BATCH_PATH: Final = IRI(XDN + "batchPath")

# domain facts
PUBLICATION: Final = IRI(XDN + "Publication")
RELAY: Final = IRI(XDN + "Relay")
RECEIPT: Final = IRI(XDN + "Receipt")
#: A failure notice: the message type of an envelope that wraps a :data:`FAILURE_NOTICE`
#: content graph (the role the paper's FAILURE response plays in the WoN prototype).
REFUSAL: Final = IRI(XDN + "Refusal")
DOCUMENT: Final = IRI(XDN + "Document")
DOCUMENT_ID: Final = IRI(XDN + "documentId")
PUBLISHER: Final = IRI(XDN + "publisher")
MANIFEST_ROOT: Final = IRI(XDN + "manifestRoot")
CONCEPT: Final = IRI(XDN + "concept")
#: The number of leaves (fragments) of the document's manifest, in its content graph.
LEAF_COUNT: Final = IRI(XDN + "leafCount")
#: The manifest leaves an envelope carries, as canonical ranges (:mod:`._leaves`).
CARRIES_LEAVES: Final = IRI(XDN + "carriesLeaves")
#: Each concept's run of manifest leaves, in a content graph: one literal, a line
#: ``"first-end CONCEPT"`` per concept in leaf order (the publisher's signed range table).
CONCEPT_LEAVES: Final = IRI(XDN + "conceptLeaves")
NODE_DESCRIPTION: Final = IRI(XDN + "NodeDescription")
CERTIFICATE: Final = IRI(XDN + "certificate")

# failure notices: what a party refused, and why (never plaintext)
FAILURE_NOTICE: Final = IRI(XDN + "FailureNotice")
REFUSAL_KIND: Final = IRI(XDN + "refusalKind")
REASON: Final = IRI(XDN + "reason")
VERSION: Final = IRI(XDN + "version")
KEY_MESSAGE: Final = IRI(XDN + "keyMessage")
EPOCH: Final = IRI(XDN + "epoch")
RECEIVED_FROM: Final = IRI(XDN + "receivedFrom")
#: A gap's number in its publisher's signed sequence (the document that never came).
SEQUENCE: Final = IRI(XDN + "sequence")

# policy-change notices: what a publisher's new policy version changed for one subscriber
#: The message type of an envelope wrapping a :data:`POLICY_CHANGE` content graph.
POLICY_NOTICE: Final = IRI(XDN + "PolicyNotice")
POLICY_CHANGE: Final = IRI(XDN + "PolicyChange")
#: The subscriber a policy change concerns (its node URI) and its certificate's fingerprint.
SUBSCRIBER: Final = IRI(XDN + "subscriber")
CERTIFICATE_FINGERPRINT: Final = IRI(XDN + "certificateFingerprint")
POLICY_VERSION: Final = IRI(XDN + "policyVersion")
PREVIOUS_POLICY_VERSION: Final = IRI(XDN + "previousPolicyVersion")
#: Concepts the new version grants the subscriber that the previous one did not, and back.
GAINS: Final = IRI(XDN + "gains")
LOSES: Final = IRI(XDN + "loses")
#: Said (``true``) when the new version grants the subscriber nothing at all: it is no longer
#: a member, and its subscription ends once the sites apply that version.
LOSES_EVERYTHING: Final = IRI(XDN + "losesEverything")
#: When the publisher evaluated the new version for the subscriber (ms since the epoch).
CHANGED_AT: Final = IRI(XDN + "changedAt")

KINDS: Final = {
    PUBLICATION.value: "publication",
    RELAY.value: "relay",
    RECEIPT.value: "receipt",
    REFUSAL.value: "refusal",
    POLICY_NOTICE.value: "policy-notice",
}
#: Kinds of envelope that nothing may wrap (they name no recipient).
FINAL_KINDS: Final = frozenset({"receipt", "refusal", "policy-notice"})
#: Kinds of envelope that wrap a content graph rather than another envelope.
ORIGIN_KINDS: Final = frozenset({"publication", "refusal", "policy-notice"})
#: Kinds of one-hop notice (no document, no fragments), by the type of their content graph.
NOTICE_KINDS: Final = frozenset({"refusal", "policy-notice"})
