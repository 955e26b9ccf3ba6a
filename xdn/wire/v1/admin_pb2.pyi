from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AdminGrant(_message.Message):
    __slots__ = ("publisher", "concepts")
    PUBLISHER_FIELD_NUMBER: _ClassVar[int]
    CONCEPTS_FIELD_NUMBER: _ClassVar[int]
    publisher: str
    concepts: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, publisher: _Optional[str] = ..., concepts: _Optional[_Iterable[str]] = ...) -> None: ...

class AdminSubscriber(_message.Message):
    __slots__ = ("name", "grants", "queue_depth", "connected")
    NAME_FIELD_NUMBER: _ClassVar[int]
    GRANTS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_DEPTH_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_FIELD_NUMBER: _ClassVar[int]
    name: str
    grants: _containers.RepeatedCompositeFieldContainer[AdminGrant]
    queue_depth: int
    connected: bool
    def __init__(self, name: _Optional[str] = ..., grants: _Optional[_Iterable[_Union[AdminGrant, _Mapping]]] = ..., queue_depth: _Optional[int] = ..., connected: _Optional[bool] = ...) -> None: ...

class AdminDownlink(_message.Message):
    __slots__ = ("site", "block", "connected", "members", "queue_depth", "address")
    SITE_FIELD_NUMBER: _ClassVar[int]
    BLOCK_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_DEPTH_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    site: str
    block: str
    connected: bool
    members: int
    queue_depth: int
    address: str
    def __init__(self, site: _Optional[str] = ..., block: _Optional[str] = ..., connected: _Optional[bool] = ..., members: _Optional[int] = ..., queue_depth: _Optional[int] = ..., address: _Optional[str] = ...) -> None: ...

class AdminUplink(_message.Message):
    __slots__ = ("address", "connected", "root")
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_FIELD_NUMBER: _ClassVar[int]
    ROOT_FIELD_NUMBER: _ClassVar[int]
    address: str
    connected: bool
    root: bool
    def __init__(self, address: _Optional[str] = ..., connected: _Optional[bool] = ..., root: _Optional[bool] = ...) -> None: ...

class AdminPolicyVersion(_message.Message):
    __slots__ = ("publisher", "version", "digest")
    PUBLISHER_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    publisher: str
    version: int
    digest: str
    def __init__(self, publisher: _Optional[str] = ..., version: _Optional[int] = ..., digest: _Optional[str] = ...) -> None: ...

class AdminNeighbour(_message.Message):
    __slots__ = ("node_id", "address")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    node_id: bytes
    address: str
    def __init__(self, node_id: _Optional[bytes] = ..., address: _Optional[str] = ...) -> None: ...

class SiteStatusRequest(_message.Message):
    __slots__ = ("subscriber_limit",)
    SUBSCRIBER_LIMIT_FIELD_NUMBER: _ClassVar[int]
    subscriber_limit: int
    def __init__(self, subscriber_limit: _Optional[int] = ...) -> None: ...

class SiteStatus(_message.Message):
    __slots__ = ("site", "block", "view", "uplink", "downlinks", "subscribers_total", "subscribers", "policies", "neighbours", "queued_total", "address")
    SITE_FIELD_NUMBER: _ClassVar[int]
    BLOCK_FIELD_NUMBER: _ClassVar[int]
    VIEW_FIELD_NUMBER: _ClassVar[int]
    UPLINK_FIELD_NUMBER: _ClassVar[int]
    DOWNLINKS_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBERS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBERS_FIELD_NUMBER: _ClassVar[int]
    POLICIES_FIELD_NUMBER: _ClassVar[int]
    NEIGHBOURS_FIELD_NUMBER: _ClassVar[int]
    QUEUED_TOTAL_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    site: str
    block: str
    view: str
    uplink: AdminUplink
    downlinks: _containers.RepeatedCompositeFieldContainer[AdminDownlink]
    subscribers_total: int
    subscribers: _containers.RepeatedCompositeFieldContainer[AdminSubscriber]
    policies: _containers.RepeatedCompositeFieldContainer[AdminPolicyVersion]
    neighbours: _containers.RepeatedCompositeFieldContainer[AdminNeighbour]
    queued_total: int
    address: str
    def __init__(self, site: _Optional[str] = ..., block: _Optional[str] = ..., view: _Optional[str] = ..., uplink: _Optional[_Union[AdminUplink, _Mapping]] = ..., downlinks: _Optional[_Iterable[_Union[AdminDownlink, _Mapping]]] = ..., subscribers_total: _Optional[int] = ..., subscribers: _Optional[_Iterable[_Union[AdminSubscriber, _Mapping]]] = ..., policies: _Optional[_Iterable[_Union[AdminPolicyVersion, _Mapping]]] = ..., neighbours: _Optional[_Iterable[_Union[AdminNeighbour, _Mapping]]] = ..., queued_total: _Optional[int] = ..., address: _Optional[str] = ...) -> None: ...

class SubscribersRequest(_message.Message):
    __slots__ = ("limit", "after")
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    limit: int
    after: str
    def __init__(self, limit: _Optional[int] = ..., after: _Optional[str] = ...) -> None: ...

class SubscribersPage(_message.Message):
    __slots__ = ("subscribers", "total", "next_after")
    SUBSCRIBERS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    NEXT_AFTER_FIELD_NUMBER: _ClassVar[int]
    subscribers: _containers.RepeatedCompositeFieldContainer[AdminSubscriber]
    total: int
    next_after: str
    def __init__(self, subscribers: _Optional[_Iterable[_Union[AdminSubscriber, _Mapping]]] = ..., total: _Optional[int] = ..., next_after: _Optional[str] = ...) -> None: ...
