from scheduling.expander_protocol import k8s_subset_pb2 as _k8s_subset_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class BestOptionsRequest(_message.Message):
    __slots__ = ("options", "nodeMap", "nodeBytesMap")
    class NodeMapEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _k8s_subset_pb2.Node
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_k8s_subset_pb2.Node, _Mapping]] = ...) -> None: ...
    class NodeBytesMapEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: bytes
        def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ...) -> None: ...
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    NODEMAP_FIELD_NUMBER: _ClassVar[int]
    NODEBYTESMAP_FIELD_NUMBER: _ClassVar[int]
    options: _containers.RepeatedCompositeFieldContainer[Option]
    nodeMap: _containers.MessageMap[str, _k8s_subset_pb2.Node]
    nodeBytesMap: _containers.ScalarMap[str, bytes]
    def __init__(self, options: _Optional[_Iterable[_Union[Option, _Mapping]]] = ..., nodeMap: _Optional[_Mapping[str, _k8s_subset_pb2.Node]] = ..., nodeBytesMap: _Optional[_Mapping[str, bytes]] = ...) -> None: ...

class BestOptionsResponse(_message.Message):
    __slots__ = ("options",)
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    options: _containers.RepeatedCompositeFieldContainer[Option]
    def __init__(self, options: _Optional[_Iterable[_Union[Option, _Mapping]]] = ...) -> None: ...

class Option(_message.Message):
    __slots__ = ("nodeGroupId", "nodeCount", "debug", "pod", "podBytes")
    NODEGROUPID_FIELD_NUMBER: _ClassVar[int]
    NODECOUNT_FIELD_NUMBER: _ClassVar[int]
    DEBUG_FIELD_NUMBER: _ClassVar[int]
    POD_FIELD_NUMBER: _ClassVar[int]
    PODBYTES_FIELD_NUMBER: _ClassVar[int]
    nodeGroupId: str
    nodeCount: int
    debug: str
    pod: _containers.RepeatedCompositeFieldContainer[_k8s_subset_pb2.Pod]
    podBytes: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, nodeGroupId: _Optional[str] = ..., nodeCount: _Optional[int] = ..., debug: _Optional[str] = ..., pod: _Optional[_Iterable[_Union[_k8s_subset_pb2.Pod, _Mapping]]] = ..., podBytes: _Optional[_Iterable[bytes]] = ...) -> None: ...
