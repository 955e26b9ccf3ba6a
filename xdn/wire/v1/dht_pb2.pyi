from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DhtContact(_message.Message):
    __slots__ = ("node_id", "address")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    node_id: bytes
    address: str
    def __init__(self, node_id: _Optional[bytes] = ..., address: _Optional[str] = ...) -> None: ...

class DhtSiteRecord(_message.Message):
    __slots__ = ("site", "address", "block", "issued_at_ms", "expires_at_ms", "certificate_pem", "signature", "web")
    SITE_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    BLOCK_FIELD_NUMBER: _ClassVar[int]
    ISSUED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    CERTIFICATE_PEM_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    WEB_FIELD_NUMBER: _ClassVar[int]
    site: str
    address: str
    block: str
    issued_at_ms: int
    expires_at_ms: int
    certificate_pem: bytes
    signature: bytes
    web: str
    def __init__(self, site: _Optional[str] = ..., address: _Optional[str] = ..., block: _Optional[str] = ..., issued_at_ms: _Optional[int] = ..., expires_at_ms: _Optional[int] = ..., certificate_pem: _Optional[bytes] = ..., signature: _Optional[bytes] = ..., web: _Optional[str] = ...) -> None: ...

class DhtPingRequest(_message.Message):
    __slots__ = ("sender_address", "nonce")
    SENDER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    sender_address: str
    nonce: bytes
    def __init__(self, sender_address: _Optional[str] = ..., nonce: _Optional[bytes] = ...) -> None: ...

class DhtPingResponse(_message.Message):
    __slots__ = ("address", "certificate_pem", "signature")
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CERTIFICATE_PEM_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    address: str
    certificate_pem: bytes
    signature: bytes
    def __init__(self, address: _Optional[str] = ..., certificate_pem: _Optional[bytes] = ..., signature: _Optional[bytes] = ...) -> None: ...

class DhtFindNodeRequest(_message.Message):
    __slots__ = ("sender_address", "target")
    SENDER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    sender_address: str
    target: bytes
    def __init__(self, sender_address: _Optional[str] = ..., target: _Optional[bytes] = ...) -> None: ...

class DhtFindNodeResponse(_message.Message):
    __slots__ = ("contacts",)
    CONTACTS_FIELD_NUMBER: _ClassVar[int]
    contacts: _containers.RepeatedCompositeFieldContainer[DhtContact]
    def __init__(self, contacts: _Optional[_Iterable[_Union[DhtContact, _Mapping]]] = ...) -> None: ...

class DhtFindValueRequest(_message.Message):
    __slots__ = ("sender_address", "key")
    SENDER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    sender_address: str
    key: bytes
    def __init__(self, sender_address: _Optional[str] = ..., key: _Optional[bytes] = ...) -> None: ...

class DhtFindValueResponse(_message.Message):
    __slots__ = ("records", "contacts")
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    CONTACTS_FIELD_NUMBER: _ClassVar[int]
    records: _containers.RepeatedCompositeFieldContainer[DhtSiteRecord]
    contacts: _containers.RepeatedCompositeFieldContainer[DhtContact]
    def __init__(self, records: _Optional[_Iterable[_Union[DhtSiteRecord, _Mapping]]] = ..., contacts: _Optional[_Iterable[_Union[DhtContact, _Mapping]]] = ...) -> None: ...

class DhtStoreRequest(_message.Message):
    __slots__ = ("sender_address", "key", "record")
    SENDER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    RECORD_FIELD_NUMBER: _ClassVar[int]
    sender_address: str
    key: bytes
    record: DhtSiteRecord
    def __init__(self, sender_address: _Optional[str] = ..., key: _Optional[bytes] = ..., record: _Optional[_Union[DhtSiteRecord, _Mapping]] = ...) -> None: ...

class DhtStoreResponse(_message.Message):
    __slots__ = ("stored",)
    STORED_FIELD_NUMBER: _ClassVar[int]
    stored: bool
    def __init__(self, stored: _Optional[bool] = ...) -> None: ...
