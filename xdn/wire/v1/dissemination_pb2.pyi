from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Fragment(_message.Message):
    __slots__ = ("fragment_id", "document_id", "publisher", "concept", "position", "parent", "epoch", "key_name", "cipher_value", "range_proof")
    class RangeProof(_message.Message):
        __slots__ = ("start", "end", "path")
        START_FIELD_NUMBER: _ClassVar[int]
        END_FIELD_NUMBER: _ClassVar[int]
        PATH_FIELD_NUMBER: _ClassVar[int]
        start: int
        end: int
        path: _containers.RepeatedScalarFieldContainer[bytes]
        def __init__(self, start: _Optional[int] = ..., end: _Optional[int] = ..., path: _Optional[_Iterable[bytes]] = ...) -> None: ...
    FRAGMENT_ID_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    PUBLISHER_FIELD_NUMBER: _ClassVar[int]
    CONCEPT_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    KEY_NAME_FIELD_NUMBER: _ClassVar[int]
    CIPHER_VALUE_FIELD_NUMBER: _ClassVar[int]
    RANGE_PROOF_FIELD_NUMBER: _ClassVar[int]
    fragment_id: str
    document_id: str
    publisher: str
    concept: str
    position: int
    parent: int
    epoch: int
    key_name: str
    cipher_value: bytes
    range_proof: Fragment.RangeProof
    def __init__(self, fragment_id: _Optional[str] = ..., document_id: _Optional[str] = ..., publisher: _Optional[str] = ..., concept: _Optional[str] = ..., position: _Optional[int] = ..., parent: _Optional[int] = ..., epoch: _Optional[int] = ..., key_name: _Optional[str] = ..., cipher_value: _Optional[bytes] = ..., range_proof: _Optional[_Union[Fragment.RangeProof, _Mapping]] = ...) -> None: ...

class Manifest(_message.Message):
    __slots__ = ("document_id", "publisher", "version", "issued_at_ms", "leaf_count", "root", "signature", "publisher_certificate", "ranges", "sequence")
    class ConceptRange(_message.Message):
        __slots__ = ("concept", "epoch", "first", "count", "previous")
        CONCEPT_FIELD_NUMBER: _ClassVar[int]
        EPOCH_FIELD_NUMBER: _ClassVar[int]
        FIRST_FIELD_NUMBER: _ClassVar[int]
        COUNT_FIELD_NUMBER: _ClassVar[int]
        PREVIOUS_FIELD_NUMBER: _ClassVar[int]
        concept: str
        epoch: int
        first: int
        count: int
        previous: int
        def __init__(self, concept: _Optional[str] = ..., epoch: _Optional[int] = ..., first: _Optional[int] = ..., count: _Optional[int] = ..., previous: _Optional[int] = ...) -> None: ...
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    PUBLISHER_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    ISSUED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    LEAF_COUNT_FIELD_NUMBER: _ClassVar[int]
    ROOT_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    PUBLISHER_CERTIFICATE_FIELD_NUMBER: _ClassVar[int]
    RANGES_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    publisher: str
    version: int
    issued_at_ms: int
    leaf_count: int
    root: bytes
    signature: bytes
    publisher_certificate: bytes
    ranges: _containers.RepeatedCompositeFieldContainer[Manifest.ConceptRange]
    sequence: int
    def __init__(self, document_id: _Optional[str] = ..., publisher: _Optional[str] = ..., version: _Optional[int] = ..., issued_at_ms: _Optional[int] = ..., leaf_count: _Optional[int] = ..., root: _Optional[bytes] = ..., signature: _Optional[bytes] = ..., publisher_certificate: _Optional[bytes] = ..., ranges: _Optional[_Iterable[_Union[Manifest.ConceptRange, _Mapping]]] = ..., sequence: _Optional[int] = ...) -> None: ...

class Checkpoint(_message.Message):
    __slots__ = ("publisher", "issued_at_ms", "sequence", "concepts", "signature", "publisher_certificate", "policy_version")
    class ConceptSequence(_message.Message):
        __slots__ = ("concept", "latest")
        CONCEPT_FIELD_NUMBER: _ClassVar[int]
        LATEST_FIELD_NUMBER: _ClassVar[int]
        concept: str
        latest: int
        def __init__(self, concept: _Optional[str] = ..., latest: _Optional[int] = ...) -> None: ...
    PUBLISHER_FIELD_NUMBER: _ClassVar[int]
    ISSUED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    CONCEPTS_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    PUBLISHER_CERTIFICATE_FIELD_NUMBER: _ClassVar[int]
    POLICY_VERSION_FIELD_NUMBER: _ClassVar[int]
    publisher: str
    issued_at_ms: int
    sequence: int
    concepts: _containers.RepeatedCompositeFieldContainer[Checkpoint.ConceptSequence]
    signature: bytes
    publisher_certificate: bytes
    policy_version: int
    def __init__(self, publisher: _Optional[str] = ..., issued_at_ms: _Optional[int] = ..., sequence: _Optional[int] = ..., concepts: _Optional[_Iterable[_Union[Checkpoint.ConceptSequence, _Mapping]]] = ..., signature: _Optional[bytes] = ..., publisher_certificate: _Optional[bytes] = ..., policy_version: _Optional[int] = ...) -> None: ...

class Entitlement(_message.Message):
    __slots__ = ("publisher", "subscriber", "certificate", "policy_version", "issued_at_ms", "valid_until_ms", "concepts", "conditional", "signature", "publisher_certificate", "notice")
    PUBLISHER_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBER_FIELD_NUMBER: _ClassVar[int]
    CERTIFICATE_FIELD_NUMBER: _ClassVar[int]
    POLICY_VERSION_FIELD_NUMBER: _ClassVar[int]
    ISSUED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    VALID_UNTIL_MS_FIELD_NUMBER: _ClassVar[int]
    CONCEPTS_FIELD_NUMBER: _ClassVar[int]
    CONDITIONAL_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    PUBLISHER_CERTIFICATE_FIELD_NUMBER: _ClassVar[int]
    NOTICE_FIELD_NUMBER: _ClassVar[int]
    publisher: str
    subscriber: str
    certificate: str
    policy_version: int
    issued_at_ms: int
    valid_until_ms: int
    concepts: _containers.RepeatedScalarFieldContainer[str]
    conditional: _containers.RepeatedScalarFieldContainer[str]
    signature: bytes
    publisher_certificate: bytes
    notice: bytes
    def __init__(self, publisher: _Optional[str] = ..., subscriber: _Optional[str] = ..., certificate: _Optional[str] = ..., policy_version: _Optional[int] = ..., issued_at_ms: _Optional[int] = ..., valid_until_ms: _Optional[int] = ..., concepts: _Optional[_Iterable[str]] = ..., conditional: _Optional[_Iterable[str]] = ..., signature: _Optional[bytes] = ..., publisher_certificate: _Optional[bytes] = ..., notice: _Optional[bytes] = ...) -> None: ...

class Missing(_message.Message):
    __slots__ = ("publisher", "sequences")
    PUBLISHER_FIELD_NUMBER: _ClassVar[int]
    SEQUENCES_FIELD_NUMBER: _ClassVar[int]
    publisher: str
    sequences: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, publisher: _Optional[str] = ..., sequences: _Optional[_Iterable[int]] = ...) -> None: ...

class Dissemination(_message.Message):
    __slots__ = ("manifest", "fragments", "provenance")
    MANIFEST_FIELD_NUMBER: _ClassVar[int]
    FRAGMENTS_FIELD_NUMBER: _ClassVar[int]
    PROVENANCE_FIELD_NUMBER: _ClassVar[int]
    manifest: Manifest
    fragments: _containers.RepeatedCompositeFieldContainer[Fragment]
    provenance: bytes
    def __init__(self, manifest: _Optional[_Union[Manifest, _Mapping]] = ..., fragments: _Optional[_Iterable[_Union[Fragment, _Mapping]]] = ..., provenance: _Optional[bytes] = ...) -> None: ...

class DisseminationRecords(_message.Message):
    __slots__ = ("manifest", "fragments", "provenance")
    MANIFEST_FIELD_NUMBER: _ClassVar[int]
    FRAGMENTS_FIELD_NUMBER: _ClassVar[int]
    PROVENANCE_FIELD_NUMBER: _ClassVar[int]
    manifest: Manifest
    fragments: _containers.RepeatedScalarFieldContainer[bytes]
    provenance: bytes
    def __init__(self, manifest: _Optional[_Union[Manifest, _Mapping]] = ..., fragments: _Optional[_Iterable[bytes]] = ..., provenance: _Optional[bytes] = ...) -> None: ...

class DeliveryRecords(_message.Message):
    __slots__ = ("sequence", "dissemination")
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    DISSEMINATION_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    dissemination: DisseminationRecords
    def __init__(self, sequence: _Optional[int] = ..., dissemination: _Optional[_Union[DisseminationRecords, _Mapping]] = ...) -> None: ...

class KeyMessage(_message.Message):
    __slots__ = ("publisher", "concept", "epoch", "subscriber", "sealed", "signature", "publisher_certificate")
    PUBLISHER_FIELD_NUMBER: _ClassVar[int]
    CONCEPT_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBER_FIELD_NUMBER: _ClassVar[int]
    SEALED_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    PUBLISHER_CERTIFICATE_FIELD_NUMBER: _ClassVar[int]
    publisher: str
    concept: str
    epoch: int
    subscriber: str
    sealed: bytes
    signature: bytes
    publisher_certificate: bytes
    def __init__(self, publisher: _Optional[str] = ..., concept: _Optional[str] = ..., epoch: _Optional[int] = ..., subscriber: _Optional[str] = ..., sealed: _Optional[bytes] = ..., signature: _Optional[bytes] = ..., publisher_certificate: _Optional[bytes] = ...) -> None: ...

class GroupRekey(_message.Message):
    __slots__ = ("publisher", "concept", "epoch", "message", "signature", "publisher_certificate")
    PUBLISHER_FIELD_NUMBER: _ClassVar[int]
    CONCEPT_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    PUBLISHER_CERTIFICATE_FIELD_NUMBER: _ClassVar[int]
    publisher: str
    concept: str
    epoch: int
    message: bytes
    signature: bytes
    publisher_certificate: bytes
    def __init__(self, publisher: _Optional[str] = ..., concept: _Optional[str] = ..., epoch: _Optional[int] = ..., message: _Optional[bytes] = ..., signature: _Optional[bytes] = ..., publisher_certificate: _Optional[bytes] = ...) -> None: ...

class DocumentKeys(_message.Message):
    __slots__ = ("publisher", "concept", "subscriber", "sealed", "signature", "publisher_certificate")
    PUBLISHER_FIELD_NUMBER: _ClassVar[int]
    CONCEPT_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBER_FIELD_NUMBER: _ClassVar[int]
    SEALED_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    PUBLISHER_CERTIFICATE_FIELD_NUMBER: _ClassVar[int]
    publisher: str
    concept: str
    subscriber: str
    sealed: bytes
    signature: bytes
    publisher_certificate: bytes
    def __init__(self, publisher: _Optional[str] = ..., concept: _Optional[str] = ..., subscriber: _Optional[str] = ..., sealed: _Optional[bytes] = ..., signature: _Optional[bytes] = ..., publisher_certificate: _Optional[bytes] = ...) -> None: ...

class Heartbeat(_message.Message):
    __slots__ = ("interval_ms",)
    INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    interval_ms: int
    def __init__(self, interval_ms: _Optional[int] = ...) -> None: ...

class GrantsChanged(_message.Message):
    __slots__ = ("previous", "grants", "reason")
    PREVIOUS_FIELD_NUMBER: _ClassVar[int]
    GRANTS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    previous: _containers.RepeatedCompositeFieldContainer[Grant]
    grants: _containers.RepeatedCompositeFieldContainer[Grant]
    reason: str
    def __init__(self, previous: _Optional[_Iterable[_Union[Grant, _Mapping]]] = ..., grants: _Optional[_Iterable[_Union[Grant, _Mapping]]] = ..., reason: _Optional[str] = ...) -> None: ...

class SubscriptionEnded(_message.Message):
    __slots__ = ("reason",)
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class Part(_message.Message):
    __slots__ = ("data", "size", "more")
    DATA_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    size: int
    more: bool
    def __init__(self, data: _Optional[bytes] = ..., size: _Optional[int] = ..., more: _Optional[bool] = ...) -> None: ...

class Delivery(_message.Message):
    __slots__ = ("sequence", "dissemination", "key", "rekey", "document_keys", "heartbeat", "grants_changed", "ended", "checkpoint", "revocation_list", "entitlement", "unavailable", "part")
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    DISSEMINATION_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    REKEY_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_KEYS_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    GRANTS_CHANGED_FIELD_NUMBER: _ClassVar[int]
    ENDED_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    REVOCATION_LIST_FIELD_NUMBER: _ClassVar[int]
    ENTITLEMENT_FIELD_NUMBER: _ClassVar[int]
    UNAVAILABLE_FIELD_NUMBER: _ClassVar[int]
    PART_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    dissemination: Dissemination
    key: KeyMessage
    rekey: GroupRekey
    document_keys: DocumentKeys
    heartbeat: Heartbeat
    grants_changed: GrantsChanged
    ended: SubscriptionEnded
    checkpoint: Checkpoint
    revocation_list: RevocationList
    entitlement: Entitlement
    unavailable: Missing
    part: Part
    def __init__(self, sequence: _Optional[int] = ..., dissemination: _Optional[_Union[Dissemination, _Mapping]] = ..., key: _Optional[_Union[KeyMessage, _Mapping]] = ..., rekey: _Optional[_Union[GroupRekey, _Mapping]] = ..., document_keys: _Optional[_Union[DocumentKeys, _Mapping]] = ..., heartbeat: _Optional[_Union[Heartbeat, _Mapping]] = ..., grants_changed: _Optional[_Union[GrantsChanged, _Mapping]] = ..., ended: _Optional[_Union[SubscriptionEnded, _Mapping]] = ..., checkpoint: _Optional[_Union[Checkpoint, _Mapping]] = ..., revocation_list: _Optional[_Union[RevocationList, _Mapping]] = ..., entitlement: _Optional[_Union[Entitlement, _Mapping]] = ..., unavailable: _Optional[_Union[Missing, _Mapping]] = ..., part: _Optional[_Union[Part, _Mapping]] = ...) -> None: ...

class RevocationList(_message.Message):
    __slots__ = ("crl",)
    CRL_FIELD_NUMBER: _ClassVar[int]
    crl: bytes
    def __init__(self, crl: _Optional[bytes] = ...) -> None: ...

class PublishRequest(_message.Message):
    __slots__ = ("dissemination", "keys", "rekeys", "document_keys", "checkpoint", "entitlements", "publish_id")
    DISSEMINATION_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    REKEYS_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_KEYS_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    ENTITLEMENTS_FIELD_NUMBER: _ClassVar[int]
    PUBLISH_ID_FIELD_NUMBER: _ClassVar[int]
    dissemination: Dissemination
    keys: _containers.RepeatedCompositeFieldContainer[KeyMessage]
    rekeys: _containers.RepeatedCompositeFieldContainer[GroupRekey]
    document_keys: _containers.RepeatedCompositeFieldContainer[DocumentKeys]
    checkpoint: Checkpoint
    entitlements: _containers.RepeatedCompositeFieldContainer[Entitlement]
    publish_id: bytes
    def __init__(self, dissemination: _Optional[_Union[Dissemination, _Mapping]] = ..., keys: _Optional[_Iterable[_Union[KeyMessage, _Mapping]]] = ..., rekeys: _Optional[_Iterable[_Union[GroupRekey, _Mapping]]] = ..., document_keys: _Optional[_Iterable[_Union[DocumentKeys, _Mapping]]] = ..., checkpoint: _Optional[_Union[Checkpoint, _Mapping]] = ..., entitlements: _Optional[_Iterable[_Union[Entitlement, _Mapping]]] = ..., publish_id: _Optional[bytes] = ...) -> None: ...

class PublishedBefore(_message.Message):
    __slots__ = ("version", "sequence", "provenance")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    PROVENANCE_FIELD_NUMBER: _ClassVar[int]
    version: int
    sequence: int
    provenance: bytes
    def __init__(self, version: _Optional[int] = ..., sequence: _Optional[int] = ..., provenance: _Optional[bytes] = ...) -> None: ...

class PublishAck(_message.Message):
    __slots__ = ("document_id", "fragments_accepted", "links_reached", "standing", "subscribers_reached", "retained", "published_before")
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    FRAGMENTS_ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    LINKS_REACHED_FIELD_NUMBER: _ClassVar[int]
    STANDING_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBERS_REACHED_FIELD_NUMBER: _ClassVar[int]
    RETAINED_FIELD_NUMBER: _ClassVar[int]
    PUBLISHED_BEFORE_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    fragments_accepted: int
    links_reached: int
    standing: SiteStanding
    subscribers_reached: int
    retained: bool
    published_before: PublishedBefore
    def __init__(self, document_id: _Optional[str] = ..., fragments_accepted: _Optional[int] = ..., links_reached: _Optional[int] = ..., standing: _Optional[_Union[SiteStanding, _Mapping]] = ..., subscribers_reached: _Optional[int] = ..., retained: _Optional[bool] = ..., published_before: _Optional[_Union[PublishedBefore, _Mapping]] = ...) -> None: ...

class SiteStanding(_message.Message):
    __slots__ = ("root", "policy_version", "uplink")
    ROOT_FIELD_NUMBER: _ClassVar[int]
    POLICY_VERSION_FIELD_NUMBER: _ClassVar[int]
    UPLINK_FIELD_NUMBER: _ClassVar[int]
    root: bool
    policy_version: int
    uplink: str
    def __init__(self, root: _Optional[bool] = ..., policy_version: _Optional[int] = ..., uplink: _Optional[str] = ...) -> None: ...

class Grant(_message.Message):
    __slots__ = ("publisher", "concepts")
    PUBLISHER_FIELD_NUMBER: _ClassVar[int]
    CONCEPTS_FIELD_NUMBER: _ClassVar[int]
    publisher: str
    concepts: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, publisher: _Optional[str] = ..., concepts: _Optional[_Iterable[str]] = ...) -> None: ...

class Member(_message.Message):
    __slots__ = ("subscriber", "certificate", "grants", "refresh", "lease")
    SUBSCRIBER_FIELD_NUMBER: _ClassVar[int]
    CERTIFICATE_FIELD_NUMBER: _ClassVar[int]
    GRANTS_FIELD_NUMBER: _ClassVar[int]
    REFRESH_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    subscriber: str
    certificate: bytes
    grants: _containers.RepeatedCompositeFieldContainer[Grant]
    refresh: _containers.RepeatedCompositeFieldContainer[Grant]
    lease: bytes
    def __init__(self, subscriber: _Optional[str] = ..., certificate: _Optional[bytes] = ..., grants: _Optional[_Iterable[_Union[Grant, _Mapping]]] = ..., refresh: _Optional[_Iterable[_Union[Grant, _Mapping]]] = ..., lease: _Optional[bytes] = ...) -> None: ...

class PathRefresh(_message.Message):
    __slots__ = ("publisher", "concept")
    PUBLISHER_FIELD_NUMBER: _ClassVar[int]
    CONCEPT_FIELD_NUMBER: _ClassVar[int]
    publisher: str
    concept: str
    def __init__(self, publisher: _Optional[str] = ..., concept: _Optional[str] = ...) -> None: ...

class MembershipRequest(_message.Message):
    __slots__ = ("publisher", "view", "since")
    PUBLISHER_FIELD_NUMBER: _ClassVar[int]
    VIEW_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    publisher: str
    view: int
    since: int
    def __init__(self, publisher: _Optional[str] = ..., view: _Optional[int] = ..., since: _Optional[int] = ...) -> None: ...

class Membership(_message.Message):
    __slots__ = ("members", "site", "standing", "view", "version", "changes_only", "gone")
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    SITE_FIELD_NUMBER: _ClassVar[int]
    STANDING_FIELD_NUMBER: _ClassVar[int]
    VIEW_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CHANGES_ONLY_FIELD_NUMBER: _ClassVar[int]
    GONE_FIELD_NUMBER: _ClassVar[int]
    members: _containers.RepeatedCompositeFieldContainer[Member]
    site: str
    standing: SiteStanding
    view: int
    version: int
    changes_only: bool
    gone: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, members: _Optional[_Iterable[_Union[Member, _Mapping]]] = ..., site: _Optional[str] = ..., standing: _Optional[_Union[SiteStanding, _Mapping]] = ..., view: _Optional[int] = ..., version: _Optional[int] = ..., changes_only: _Optional[bool] = ..., gone: _Optional[_Iterable[str]] = ...) -> None: ...

class SubscribeRequest(_message.Message):
    __slots__ = ("concepts", "resume_after", "retained", "lease")
    CONCEPTS_FIELD_NUMBER: _ClassVar[int]
    RESUME_AFTER_FIELD_NUMBER: _ClassVar[int]
    RETAINED_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    concepts: _containers.RepeatedScalarFieldContainer[str]
    resume_after: int
    retained: bool
    lease: bytes
    def __init__(self, concepts: _Optional[_Iterable[str]] = ..., resume_after: _Optional[int] = ..., retained: _Optional[bool] = ..., lease: _Optional[bytes] = ...) -> None: ...

class UnsubscribeRequest(_message.Message):
    __slots__ = ("leave",)
    LEAVE_FIELD_NUMBER: _ClassVar[int]
    leave: bytes
    def __init__(self, leave: _Optional[bytes] = ...) -> None: ...

class UnsubscribeAck(_message.Message):
    __slots__ = ("subscriber", "site", "discarded")
    SUBSCRIBER_FIELD_NUMBER: _ClassVar[int]
    SITE_FIELD_NUMBER: _ClassVar[int]
    DISCARDED_FIELD_NUMBER: _ClassVar[int]
    subscriber: str
    site: str
    discarded: int
    def __init__(self, subscriber: _Optional[str] = ..., site: _Optional[str] = ..., discarded: _Optional[int] = ...) -> None: ...

class Ack(_message.Message):
    __slots__ = ("sequence", "receipt")
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    receipt: bytes
    def __init__(self, sequence: _Optional[int] = ..., receipt: _Optional[bytes] = ...) -> None: ...

class ClientMessage(_message.Message):
    __slots__ = ("subscribe", "ack", "heartbeat", "refresh", "lease", "missing")
    SUBSCRIBE_FIELD_NUMBER: _ClassVar[int]
    ACK_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    REFRESH_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    MISSING_FIELD_NUMBER: _ClassVar[int]
    subscribe: SubscribeRequest
    ack: Ack
    heartbeat: Heartbeat
    refresh: PathRefresh
    lease: bytes
    missing: Missing
    def __init__(self, subscribe: _Optional[_Union[SubscribeRequest, _Mapping]] = ..., ack: _Optional[_Union[Ack, _Mapping]] = ..., heartbeat: _Optional[_Union[Heartbeat, _Mapping]] = ..., refresh: _Optional[_Union[PathRefresh, _Mapping]] = ..., lease: _Optional[bytes] = ..., missing: _Optional[_Union[Missing, _Mapping]] = ...) -> None: ...

class Subscribed(_message.Message):
    __slots__ = ("subscriber", "served_by", "grants", "resumed_after", "retained", "block", "crl", "heartbeat_ms")
    SUBSCRIBER_FIELD_NUMBER: _ClassVar[int]
    SERVED_BY_FIELD_NUMBER: _ClassVar[int]
    GRANTS_FIELD_NUMBER: _ClassVar[int]
    RESUMED_AFTER_FIELD_NUMBER: _ClassVar[int]
    RETAINED_FIELD_NUMBER: _ClassVar[int]
    BLOCK_FIELD_NUMBER: _ClassVar[int]
    CRL_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_MS_FIELD_NUMBER: _ClassVar[int]
    subscriber: str
    served_by: str
    grants: _containers.RepeatedCompositeFieldContainer[Grant]
    resumed_after: int
    retained: int
    block: str
    crl: bytes
    heartbeat_ms: int
    def __init__(self, subscriber: _Optional[str] = ..., served_by: _Optional[str] = ..., grants: _Optional[_Iterable[_Union[Grant, _Mapping]]] = ..., resumed_after: _Optional[int] = ..., retained: _Optional[int] = ..., block: _Optional[str] = ..., crl: _Optional[bytes] = ..., heartbeat_ms: _Optional[int] = ...) -> None: ...

class ServerMessage(_message.Message):
    __slots__ = ("subscribed", "delivery", "heartbeat")
    SUBSCRIBED_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    subscribed: Subscribed
    delivery: Delivery
    heartbeat: Heartbeat
    def __init__(self, subscribed: _Optional[_Union[Subscribed, _Mapping]] = ..., delivery: _Optional[_Union[Delivery, _Mapping]] = ..., heartbeat: _Optional[_Union[Heartbeat, _Mapping]] = ...) -> None: ...

class LinkHello(_message.Message):
    __slots__ = ("site", "block", "resume_after")
    SITE_FIELD_NUMBER: _ClassVar[int]
    BLOCK_FIELD_NUMBER: _ClassVar[int]
    RESUME_AFTER_FIELD_NUMBER: _ClassVar[int]
    site: str
    block: str
    resume_after: int
    def __init__(self, site: _Optional[str] = ..., block: _Optional[str] = ..., resume_after: _Optional[int] = ...) -> None: ...

class InterestUpdate(_message.Message):
    __slots__ = ("members", "more", "view", "version", "base", "gone")
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    VIEW_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    BASE_FIELD_NUMBER: _ClassVar[int]
    GONE_FIELD_NUMBER: _ClassVar[int]
    members: _containers.RepeatedCompositeFieldContainer[Member]
    more: bool
    view: int
    version: int
    base: int
    gone: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, members: _Optional[_Iterable[_Union[Member, _Mapping]]] = ..., more: _Optional[bool] = ..., view: _Optional[int] = ..., version: _Optional[int] = ..., base: _Optional[int] = ..., gone: _Optional[_Iterable[str]] = ...) -> None: ...

class LinkMessage(_message.Message):
    __slots__ = ("hello", "interest", "ack", "heartbeat")
    HELLO_FIELD_NUMBER: _ClassVar[int]
    INTEREST_FIELD_NUMBER: _ClassVar[int]
    ACK_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    hello: LinkHello
    interest: InterestUpdate
    ack: Ack
    heartbeat: Heartbeat
    def __init__(self, hello: _Optional[_Union[LinkHello, _Mapping]] = ..., interest: _Optional[_Union[InterestUpdate, _Mapping]] = ..., ack: _Optional[_Union[Ack, _Mapping]] = ..., heartbeat: _Optional[_Union[Heartbeat, _Mapping]] = ...) -> None: ...

class ReceiptBatch(_message.Message):
    __slots__ = ("receipts",)
    RECEIPTS_FIELD_NUMBER: _ClassVar[int]
    receipts: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, receipts: _Optional[_Iterable[bytes]] = ...) -> None: ...

class ReceiptBatchAck(_message.Message):
    __slots__ = ("accepted", "duplicates", "refused")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    DUPLICATES_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    accepted: int
    duplicates: int
    refused: int
    def __init__(self, accepted: _Optional[int] = ..., duplicates: _Optional[int] = ..., refused: _Optional[int] = ...) -> None: ...

class NoticeBatch(_message.Message):
    __slots__ = ("notices",)
    NOTICES_FIELD_NUMBER: _ClassVar[int]
    notices: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, notices: _Optional[_Iterable[bytes]] = ...) -> None: ...

class ReceiptsRequest(_message.Message):
    __slots__ = ("publisher", "after", "limit")
    PUBLISHER_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    publisher: str
    after: int
    limit: int
    def __init__(self, publisher: _Optional[str] = ..., after: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class StoredReceipt(_message.Message):
    __slots__ = ("id", "receipt")
    ID_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    id: int
    receipt: bytes
    def __init__(self, id: _Optional[int] = ..., receipt: _Optional[bytes] = ...) -> None: ...

class ReceiptsReply(_message.Message):
    __slots__ = ("receipts", "more", "site")
    RECEIPTS_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    SITE_FIELD_NUMBER: _ClassVar[int]
    receipts: _containers.RepeatedCompositeFieldContainer[StoredReceipt]
    more: bool
    site: str
    def __init__(self, receipts: _Optional[_Iterable[_Union[StoredReceipt, _Mapping]]] = ..., more: _Optional[bool] = ..., site: _Optional[str] = ...) -> None: ...
