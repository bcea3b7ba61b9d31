package otlptrace

import (
	"math"
	"slices"
	"strings"
	"unicode/utf8"
	"unsafe"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of opentelemetry-proto's collector/trace/v1 and trace/v1 messages (and
// common/v1, resource/v1), the ones the encoder writes.
const (
	fRequestResourceSpans = 1 // ExportTraceServiceRequest.resource_spans

	fResourceSpansResource   = 1
	fResourceSpansScopeSpans = 2
	fResourceSpansSchemaURL  = 3

	fResourceAttributes = 1 // Resource.attributes

	fScopeSpansScope     = 1
	fScopeSpansSpans     = 2
	fScopeSpansSchemaURL = 3

	fScopeName       = 1 // InstrumentationScope.name
	fScopeVersion    = 2
	fScopeAttributes = 3

	fSpanTraceID           = 1
	fSpanSpanID            = 2
	fSpanTraceState        = 3
	fSpanParentSpanID      = 4
	fSpanName              = 5
	fSpanKind              = 6
	fSpanStart             = 7
	fSpanEnd               = 8
	fSpanAttributes        = 9
	fSpanDroppedAttributes = 10
	fSpanEvents            = 11
	fSpanDroppedEvents     = 12
	fSpanLinks             = 13
	fSpanDroppedLinks      = 14
	fSpanStatus            = 15
	fSpanFlags             = 16

	fEventTime              = 1
	fEventName              = 2
	fEventAttributes        = 3
	fEventDroppedAttributes = 4

	fLinkTraceID           = 1
	fLinkSpanID            = 2
	fLinkTraceState        = 3
	fLinkAttributes        = 4
	fLinkDroppedAttributes = 5
	fLinkFlags             = 6

	fStatusMessage = 2
	fStatusCode    = 3

	fKeyValueKey   = 1
	fKeyValueValue = 2

	fAnyString = 1
	fAnyBool   = 2
	fAnyInt    = 3
	fAnyDouble = 4
	fAnyArray  = 5
	fAnyKvlist = 6
	fAnyBytes  = 7

	fArrayValues = 1 // ArrayValue.values, KeyValueList.values

	// SpanFlags: the low byte is the W3C trace flags; these say whether the parent is remote.
	spanFlagsHasIsRemote = 0x100
	spanFlagsIsRemote    = 0x200

	// Status.StatusCode.
	statusCodeOK    = 1
	statusCodeError = 2
)

// TraceEncoder appends ExportTraceServiceRequests into a buffer it reuses: one ResourceSpans
// (the process's resource) with a ScopeSpans per run of spans of the same scope. Every
// message's length is computed before it is written, so nothing is copied back, and once the
// buffer and the size table have grown to a batch's needs an encoding allocates nothing.
// It is not safe for concurrent use: the export goroutine owns Setup's.
type TraceEncoder struct {
	resource  []byte // the Resource message, encoded once
	schemaURL string // the resource's
	buf       []byte
	sizes     []int // each span's encoded size, from the sizing pass
	// values are the sizes of the spans' attribute values, in order: the sizing pass finds
	// them, the writing pass takes them in turn instead of measuring every string again.
	values []int
	next   int
	dirty  bool // a key or string value of the batch's span attributes is not UTF-8
	// checked remembers strings found valid UTF-8, by where their bytes are: Go strings are
	// immutable, so the same data and length is the same text. Attribute keys and most values
	// (the system, the operation, the topic) are the same strings record after record.
	checked [256]checkedString
}

type checkedString struct {
	data *byte
	n    int
}

// valid reports whether s is UTF-8, looking at its bytes only the first time they are seen.
func (e *TraceEncoder) valid(s string) bool {
	if len(s) < 8 {
		return utf8.ValidString(s) // as cheap as looking it up
	}
	p := unsafe.StringData(s)
	c := &e.checked[(uintptr(unsafe.Pointer(p))>>3)%uintptr(len(e.checked))]
	if c.data == p && c.n == len(s) {
		return true
	}
	if !utf8.ValidString(s) {
		return false
	}
	c.data, c.n = p, len(s)
	return true
}

// NewTraceEncoder returns an encoder of spans of res (the process's resource, written once).
func NewTraceEncoder(res *resource.Resource) *TraceEncoder {
	e := &TraceEncoder{}
	e.SetResource(res)
	return e
}

// SetResource makes the requests encoded from now on carry res: a resource attribute known
// only after start (the client instance id the broker assigns). Like Encode, it is for the
// encoder's one goroutine.
func (e *TraceEncoder) SetResource(res *resource.Resource) {
	e.resource, e.schemaURL = e.resource[:0], ""
	if res != nil {
		attrs := res.Attributes()
		e.resource = appendAttrs(slices.Grow(e.resource, attrsSize(fResourceAttributes, attrs)), fResourceAttributes, attrs)
		e.schemaURL = res.SchemaURL()
	}
}

// Encode returns the ExportTraceServiceRequest of spans, in the encoder's buffer: valid until
// the next call.
func (e *TraceEncoder) Encode(spans []Span) []byte {
	e.sizes, e.values, e.next, e.dirty = e.sizes[:0], e.values[:0], 0, false
	for i := range spans {
		e.sizes = append(e.sizes, e.spanSize(&spans[i]))
	}
	// The ResourceSpans' length: the resource, then each scope's run of spans.
	rsSize := tagSize(fResourceSpansResource) + protowire.SizeBytes(len(e.resource))
	for i := 0; i < len(spans); {
		j, ssSize := e.scopeRun(spans, i)
		rsSize += tagSize(fResourceSpansScopeSpans) + protowire.SizeBytes(ssSize)
		i = j
	}
	rsSize += stringSize(fResourceSpansSchemaURL, e.schemaURL)
	need := tagSize(fRequestResourceSpans) + protowire.SizeBytes(rsSize)
	if cap(e.buf) < need {
		e.buf = make([]byte, 0, need+need/4)
	}
	b := e.buf[:0]
	b = appendTag(b, fRequestResourceSpans, protowire.BytesType)
	b = appendUvarint(b, uint64(rsSize))
	b = appendTag(b, fResourceSpansResource, protowire.BytesType)
	b = protowire.AppendBytes(b, e.resource)
	for i := 0; i < len(spans); {
		j, ssSize := e.scopeRun(spans, i)
		b = appendTag(b, fResourceSpansScopeSpans, protowire.BytesType)
		b = appendUvarint(b, uint64(ssSize))
		sc := spans[i].Scope
		b = appendTag(b, fScopeSpansScope, protowire.BytesType)
		b = appendUvarint(b, uint64(scopeSize(sc)))
		if sc == nil {
			b = appendString(b, fScopeName, RecordsScope)
		} else {
			b = appendString(b, fScopeName, sc.Name)
			b = appendString(b, fScopeVersion, sc.Version)
			b = appendAttrs(b, fScopeAttributes, sc.Attributes.ToSlice())
		}
		for k := i; k < j; k++ {
			b = appendTag(b, fScopeSpansSpans, protowire.BytesType)
			b = appendUvarint(b, uint64(e.sizes[k]))
			b = e.appendSpan(b, &spans[k])
		}
		if sc != nil {
			b = appendString(b, fScopeSpansSchemaURL, sc.SchemaURL)
		}
		i = j
	}
	b = appendString(b, fResourceSpansSchemaURL, e.schemaURL)
	e.buf = b
	return b
}

// scopeRun returns the end of the run of spans of spans[i]'s scope, and its ScopeSpans' size.
func (e *TraceEncoder) scopeRun(spans []Span, i int) (int, int) {
	sc := spans[i].Scope
	size := tagSize(fScopeSpansScope) + protowire.SizeBytes(scopeSize(sc))
	if sc != nil {
		size += stringSize(fScopeSpansSchemaURL, sc.SchemaURL)
	}
	j := i
	for ; j < len(spans) && sameScope(spans[j].Scope, sc); j++ {
		size += tagSize(fScopeSpansSpans) + protowire.SizeBytes(e.sizes[j])
	}
	return j, size
}

// sameScope reports whether a and b are the same instrumentation scope (nil: the records').
func sameScope(a, b *instrumentation.Scope) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil {
		return false
	}
	return a.Name == b.Name && a.Version == b.Version && a.SchemaURL == b.SchemaURL && a.Attributes.Equals(&b.Attributes)
}

// scopeSize is an InstrumentationScope's size. Only the tracer path's spans have a scope of
// their own (the records' is nil), so its attribute set's copy costs nothing on the hot path.
func scopeSize(sc *instrumentation.Scope) int {
	if sc == nil {
		return stringSize(fScopeName, RecordsScope)
	}
	return stringSize(fScopeName, sc.Name) + stringSize(fScopeVersion, sc.Version) +
		attrsSize(fScopeAttributes, sc.Attributes.ToSlice())
}

func (e *TraceEncoder) spanSize(s *Span) int {
	n := idSize(fSpanTraceID, 16) + idSize(fSpanSpanID, 8) + stringSize(fSpanTraceState, s.TraceState)
	if s.ParentSpanID.IsValid() {
		n += idSize(fSpanParentSpanID, 8)
	}
	n += e.stringSize(fSpanName, s.Name) + varintSize(fSpanKind, uint64(s.Kind)) +
		2*(tagSize(fSpanStart)+protowire.SizeFixed64()) + e.spanAttrsSize(s) +
		varintSize(fSpanDroppedAttributes, uint64(clampUint32(s.DroppedAttributes)))
	for i := range s.Events {
		n += tagSize(fSpanEvents) + protowire.SizeBytes(eventSize(&s.Events[i]))
	}
	n += varintSize(fSpanDroppedEvents, uint64(clampUint32(s.DroppedEvents)))
	for i := range s.Links {
		n += tagSize(fSpanLinks) + protowire.SizeBytes(linkSize(&s.Links[i]))
	}
	n += varintSize(fSpanDroppedLinks, uint64(clampUint32(s.DroppedLinks)))
	if st := statusSize(s); st > 0 {
		n += tagSize(fSpanStatus) + protowire.SizeBytes(st)
	}
	return n + tagSize(fSpanFlags) + protowire.SizeFixed32()
}

func (e *TraceEncoder) appendSpan(b []byte, s *Span) []byte {
	b = appendID(b, fSpanTraceID, s.TraceID[:])
	b = appendID(b, fSpanSpanID, s.SpanID[:])
	b = appendString(b, fSpanTraceState, s.TraceState)
	if s.ParentSpanID.IsValid() {
		b = appendID(b, fSpanParentSpanID, s.ParentSpanID[:])
	}
	b = e.appendString(b, fSpanName, s.Name)
	b = appendVarint(b, fSpanKind, uint64(s.Kind))
	b = appendTag(b, fSpanStart, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, uint64(max(0, s.Start)))
	b = appendTag(b, fSpanEnd, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, uint64(max(0, s.End)))
	if enc := s.Encoded; enc != nil && enc.n <= len(s.Attributes) {
		b = append(b, enc.b...)
		b = e.appendAttrs(b, s.Attributes[enc.n:])
	} else {
		b = e.appendAttrs(b, s.Attributes)
	}
	b = appendVarint(b, fSpanDroppedAttributes, uint64(clampUint32(s.DroppedAttributes)))
	for i := range s.Events {
		ev := &s.Events[i]
		b = appendTag(b, fSpanEvents, protowire.BytesType)
		b = appendUvarint(b, uint64(eventSize(ev)))
		b = appendTag(b, fEventTime, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, uint64(max(0, ev.Time.UnixNano())))
		b = appendString(b, fEventName, ev.Name)
		b = appendAttrs(b, fEventAttributes, ev.Attributes)
		b = appendVarint(b, fEventDroppedAttributes, uint64(clampUint32(ev.DroppedAttributeCount)))
	}
	b = appendVarint(b, fSpanDroppedEvents, uint64(clampUint32(s.DroppedEvents)))
	for i := range s.Links {
		l := &s.Links[i]
		b = appendTag(b, fSpanLinks, protowire.BytesType)
		b = appendUvarint(b, uint64(linkSize(l)))
		b = appendID(b, fLinkTraceID, l.TraceID[:])
		b = appendID(b, fLinkSpanID, l.SpanID[:])
		b = appendString(b, fLinkTraceState, l.TraceState)
		b = appendAttrs(b, fLinkAttributes, l.Attributes)
		b = appendTag(b, fLinkFlags, protowire.Fixed32Type)
		b = protowire.AppendFixed32(b, spanFlags(l.Flags, l.Remote))
	}
	b = appendVarint(b, fSpanDroppedLinks, uint64(clampUint32(s.DroppedLinks)))
	if st := statusSize(s); st > 0 {
		b = appendTag(b, fSpanStatus, protowire.BytesType)
		b = appendUvarint(b, uint64(st))
		b = appendString(b, fStatusMessage, s.StatusMessage)
		b = appendVarint(b, fStatusCode, statusCode(s.Status))
	}
	// The parent's remoteness, as the SDK's exporter reports it.
	b = appendTag(b, fSpanFlags, protowire.Fixed32Type)
	return protowire.AppendFixed32(b, spanFlags(s.Flags, s.ParentSpanID.IsValid() && s.ParentRemote))
}

func spanFlags(f trace.TraceFlags, remote bool) uint32 {
	flags := uint32(spanFlagsHasIsRemote)
	if f.IsSampled() {
		flags |= 1
	}
	if remote {
		flags |= spanFlagsIsRemote
	}
	return flags
}

// statusCode maps the API's codes (Unset, Error, Ok) to OTLP's (UNSET, OK, ERROR).
func statusCode(c codes.Code) uint64 {
	switch c {
	case codes.Ok:
		return statusCodeOK
	case codes.Error:
		return statusCodeError
	}
	return 0
}

func statusSize(s *Span) int {
	return stringSize(fStatusMessage, s.StatusMessage) + varintSize(fStatusCode, statusCode(s.Status))
}

func eventSize(ev *sdktrace.Event) int {
	return tagSize(fEventTime) + protowire.SizeFixed64() + stringSize(fEventName, ev.Name) +
		attrsSize(fEventAttributes, ev.Attributes) + varintSize(fEventDroppedAttributes, uint64(clampUint32(ev.DroppedAttributeCount)))
}

func linkSize(l *Link) int {
	return idSize(fLinkTraceID, 16) + idSize(fLinkSpanID, 8) + stringSize(fLinkTraceState, l.TraceState) +
		attrsSize(fLinkAttributes, l.Attributes) + tagSize(fLinkFlags) + protowire.SizeFixed32()
}

// spanAttrsSize is the size of s's attributes: those already encoded (s.Encoded) as they are,
// the rest through attrsSize.
func (e *TraceEncoder) spanAttrsSize(s *Span) int {
	if enc := s.Encoded; enc != nil && enc.n <= len(s.Attributes) {
		return len(enc.b) + e.attrsSize(s.Attributes[enc.n:])
	}
	return e.attrsSize(s.Attributes)
}

// attrsSize is the size of a span's attributes, each value's size kept for appendAttrs. Keys
// and string values are checked for UTF-8 here; when every one in the batch is valid (dirty
// stays false) the writing pass copies them without looking again.
func (e *TraceEncoder) attrsSize(attrs []attribute.KeyValue) int {
	n := 0
	for i := range attrs {
		kv := &attrs[i]
		var vs int
		if kv.Value.Type() == attribute.STRING {
			str := kv.Value.AsString()
			if !e.valid(str) {
				e.dirty, str = true, validUTF8(str)
			}
			vs = tagSize(fAnyString) + protowire.SizeBytes(len(str))
		} else {
			vs = anySize(&kv.Value)
		}
		e.values = append(e.values, vs)
		key := string(kv.Key)
		if !e.valid(key) {
			e.dirty, key = true, validUTF8(key)
		}
		kl := 0
		if key != "" {
			kl = tagSize(fKeyValueKey) + protowire.SizeBytes(len(key))
		}
		n += tagSize(fSpanAttributes) + protowire.SizeBytes(kl+tagSize(fKeyValueValue)+protowire.SizeBytes(vs))
	}
	return n
}

// appendAttrs appends a span's attributes, with the value sizes attrsSize kept.
func (e *TraceEncoder) appendAttrs(b []byte, attrs []attribute.KeyValue) []byte {
	for i := range attrs {
		kv := &attrs[i]
		vs := e.values[e.next]
		e.next++
		key := string(kv.Key)
		if e.dirty {
			key = validUTF8(key)
		}
		kl := 0
		if key != "" {
			kl = 1 + protowire.SizeBytes(len(key))
		}
		b = append(b, byte(fSpanAttributes<<3|protowire.BytesType))
		b = appendUvarint(b, uint64(kl+1+protowire.SizeBytes(vs)))
		if key != "" {
			b = append(b, byte(fKeyValueKey<<3|protowire.BytesType))
			b = appendUvarint(b, uint64(len(key)))
			b = append(b, key...)
		}
		b = append(b, byte(fKeyValueValue<<3|protowire.BytesType))
		b = appendUvarint(b, uint64(vs))
		if kv.Value.Type() == attribute.STRING && !e.dirty {
			str := kv.Value.AsString()
			b = append(b, byte(fAnyString<<3|protowire.BytesType))
			b = appendUvarint(b, uint64(len(str)))
			b = append(b, str...)
			continue
		}
		b = appendAny(b, &kv.Value)
	}
	return b
}

// appendTag is protowire.AppendTag, one byte for the fields numbered below 16 (all but one of
// those the encoder writes).
func appendTag(b []byte, num protowire.Number, typ protowire.Type) []byte {
	if num < 16 {
		return append(b, byte(num)<<3|byte(typ&7))
	}
	return protowire.AppendVarint(b, uint64(num)<<3|uint64(typ&7))
}

// tagSize is protowire.SizeTag, known without counting bits below field 16.
func tagSize(num protowire.Number) int {
	if num < 16 {
		return 1
	}
	return protowire.SizeTag(num)
}

// appendUvarint is protowire.AppendVarint with the one-byte case inlined: most lengths and
// every tag the encoder writes but the span flags' are below 128.
func appendUvarint(b []byte, v uint64) []byte {
	if v < 0x80 {
		return append(b, byte(v))
	}
	return protowire.AppendVarint(b, v)
}

// attrsSize is the size of attrs as repeated KeyValue field num.
func attrsSize(num protowire.Number, attrs []attribute.KeyValue) int {
	n := 0
	for i := range attrs {
		n += tagSize(num) + protowire.SizeBytes(kvSize(string(attrs[i].Key), &attrs[i].Value))
	}
	return n
}

func appendAttrs(b []byte, num protowire.Number, attrs []attribute.KeyValue) []byte {
	for i := range attrs {
		b = appendKV(b, num, string(attrs[i].Key), &attrs[i].Value)
	}
	return b
}

// kvSize is a KeyValue's size. Its value is always written, even empty: the key is set.
func kvSize(key string, v *attribute.Value) int {
	return stringSize(fKeyValueKey, key) + tagSize(fKeyValueValue) + protowire.SizeBytes(anySize(v))
}

func appendKV(b []byte, num protowire.Number, key string, v *attribute.Value) []byte {
	b = appendTag(b, num, protowire.BytesType)
	b = appendUvarint(b, uint64(kvSize(key, v)))
	b = appendString(b, fKeyValueKey, key)
	b = appendTag(b, fKeyValueValue, protowire.BytesType)
	b = appendUvarint(b, uint64(anySize(v)))
	return appendAny(b, v)
}

// anySize is the size of v as an AnyValue, the SDK exporter's mapping (tracetransform.Value):
// slices are ArrayValues, maps KeyValueLists, an empty value an empty AnyValue, an unknown
// type the string "INVALID". The value set in a oneof is written even when it is the zero.
func anySize(v *attribute.Value) int {
	switch v.Type() {
	case attribute.BOOL:
		return tagSize(fAnyBool) + 1
	case attribute.INT64:
		return tagSize(fAnyInt) + protowire.SizeVarint(uint64(v.AsInt64()))
	case attribute.FLOAT64:
		return tagSize(fAnyDouble) + protowire.SizeFixed64()
	case attribute.STRING:
		return tagSize(fAnyString) + protowire.SizeBytes(len(validUTF8(v.AsString())))
	case attribute.BYTESLICE:
		return tagSize(fAnyBytes) + protowire.SizeBytes(len(v.AsByteSlice()))
	case attribute.BOOLSLICE, attribute.INT64SLICE, attribute.FLOAT64SLICE, attribute.STRINGSLICE, attribute.SLICE:
		return tagSize(fAnyArray) + protowire.SizeBytes(arraySize(v))
	case attribute.MAP:
		return tagSize(fAnyKvlist) + protowire.SizeBytes(attrsSize(fArrayValues, v.AsMap()))
	case attribute.EMPTY:
		return 0
	}
	return tagSize(fAnyString) + protowire.SizeBytes(len("INVALID"))
}

func appendAny(b []byte, v *attribute.Value) []byte {
	switch v.Type() {
	case attribute.BOOL:
		return protowire.AppendVarint(appendTag(b, fAnyBool, protowire.VarintType), protowire.EncodeBool(v.AsBool()))
	case attribute.INT64:
		return protowire.AppendVarint(appendTag(b, fAnyInt, protowire.VarintType), uint64(v.AsInt64()))
	case attribute.FLOAT64:
		return protowire.AppendFixed64(appendTag(b, fAnyDouble, protowire.Fixed64Type), math.Float64bits(v.AsFloat64()))
	case attribute.STRING:
		return protowire.AppendString(appendTag(b, fAnyString, protowire.BytesType), validUTF8(v.AsString()))
	case attribute.BYTESLICE:
		return protowire.AppendBytes(appendTag(b, fAnyBytes, protowire.BytesType), v.AsByteSlice())
	case attribute.BOOLSLICE, attribute.INT64SLICE, attribute.FLOAT64SLICE, attribute.STRINGSLICE, attribute.SLICE:
		b = appendTag(b, fAnyArray, protowire.BytesType)
		b = appendUvarint(b, uint64(arraySize(v)))
		return appendArray(b, v)
	case attribute.MAP:
		m := v.AsMap()
		b = appendTag(b, fAnyKvlist, protowire.BytesType)
		b = appendUvarint(b, uint64(attrsSize(fArrayValues, m)))
		return appendAttrs(b, fArrayValues, m)
	case attribute.EMPTY:
		return b
	}
	return protowire.AppendString(appendTag(b, fAnyString, protowire.BytesType), "INVALID")
}

// arraySize is the size of a slice value as an ArrayValue: each element an AnyValue. The
// typed slices are read through As*Slice, which copies: such attributes are rare (none of the
// producer's own), and the copies stay on the export goroutine.
func arraySize(v *attribute.Value) int {
	n := 0
	elem := func(size int) { n += tagSize(fArrayValues) + protowire.SizeBytes(size) }
	switch v.Type() {
	case attribute.BOOLSLICE:
		for range v.AsBoolSlice() {
			elem(tagSize(fAnyBool) + 1)
		}
	case attribute.INT64SLICE:
		for _, x := range v.AsInt64Slice() {
			elem(tagSize(fAnyInt) + protowire.SizeVarint(uint64(x)))
		}
	case attribute.FLOAT64SLICE:
		for range v.AsFloat64Slice() {
			elem(tagSize(fAnyDouble) + protowire.SizeFixed64())
		}
	case attribute.STRINGSLICE:
		for _, s := range v.AsStringSlice() {
			elem(tagSize(fAnyString) + protowire.SizeBytes(len(validUTF8(s))))
		}
	case attribute.SLICE:
		for _, x := range v.AsSlice() {
			elem(anySize(&x))
		}
	}
	return n
}

func appendArray(b []byte, v *attribute.Value) []byte {
	elem := func(size int) {
		b = appendTag(b, fArrayValues, protowire.BytesType)
		b = appendUvarint(b, uint64(size))
	}
	switch v.Type() {
	case attribute.BOOLSLICE:
		for _, x := range v.AsBoolSlice() {
			elem(tagSize(fAnyBool) + 1)
			b = protowire.AppendVarint(appendTag(b, fAnyBool, protowire.VarintType), protowire.EncodeBool(x))
		}
	case attribute.INT64SLICE:
		for _, x := range v.AsInt64Slice() {
			elem(tagSize(fAnyInt) + protowire.SizeVarint(uint64(x)))
			b = protowire.AppendVarint(appendTag(b, fAnyInt, protowire.VarintType), uint64(x))
		}
	case attribute.FLOAT64SLICE:
		for _, x := range v.AsFloat64Slice() {
			elem(tagSize(fAnyDouble) + protowire.SizeFixed64())
			b = protowire.AppendFixed64(appendTag(b, fAnyDouble, protowire.Fixed64Type), math.Float64bits(x))
		}
	case attribute.STRINGSLICE:
		for _, s := range v.AsStringSlice() {
			s = validUTF8(s)
			elem(tagSize(fAnyString) + protowire.SizeBytes(len(s)))
			b = protowire.AppendString(appendTag(b, fAnyString, protowire.BytesType), s)
		}
	case attribute.SLICE:
		for _, x := range v.AsSlice() {
			elem(anySize(&x))
			b = appendAny(b, &x)
		}
	}
	return b
}

// stringSize is stringSize for a string the spans repeat (their names): checked for UTF-8
// through the cache of strings found valid, like the attributes' (dirty when one is not).
func (e *TraceEncoder) stringSize(num protowire.Number, s string) int {
	if s == "" {
		return 0
	}
	if !e.valid(s) {
		e.dirty, s = true, validUTF8(s)
	}
	return tagSize(num) + protowire.SizeBytes(len(s))
}

// appendString writes what e.stringSize sized: without looking at s again unless a string
// of the batch was not UTF-8.
func (e *TraceEncoder) appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	if e.dirty {
		s = validUTF8(s)
	}
	b = appendTag(b, num, protowire.BytesType)
	b = appendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// The scalar fields below follow proto3: a zero value is not written.

func stringSize(num protowire.Number, s string) int {
	if s == "" {
		return 0
	}
	return tagSize(num) + protowire.SizeBytes(len(validUTF8(s)))
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	return protowire.AppendString(appendTag(b, num, protowire.BytesType), validUTF8(s))
}

// validUTF8 returns s with each invalid UTF-8 sequence replaced by U+FFFD. A protobuf string
// must be UTF-8, and receivers (the generated decoders, the Collector's) reject a request with
// one that is not: one record key of arbitrary bytes would lose the whole batch. Only such a
// string is copied, once in each pass.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

func varintSize(num protowire.Number, v uint64) int {
	if v == 0 {
		return 0
	}
	return tagSize(num) + protowire.SizeVarint(v)
}

func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return appendUvarint(appendTag(b, num, protowire.VarintType), v)
}

// idSize is the size of a trace or span id field (n is 16 or 8: one byte of length).
func idSize(num protowire.Number, n int) int { return tagSize(num) + 1 + n }

// appendID appends a trace or span id field: its number is below 16 and its length below 128,
// so tag and length are a byte each.
func appendID(b []byte, num protowire.Number, id []byte) []byte {
	b = append(b, byte(num)<<3|byte(protowire.BytesType), byte(len(id)))
	return append(b, id...)
}

func clampUint32(v int) uint32 {
	if v <= 0 {
		return 0
	}
	if int64(v) > math.MaxUint32 {
		return math.MaxUint32
	}
	return uint32(v)
}
