package mskiam

import (
	"bytes"
	"encoding/json"
	"slices"
	"unicode/utf16"
)

// payloadKeys are the payload's keys in the order AWS4SignedPayloadGenerator.toKeyValueMap puts
// them into its HashMap: the presigned request's query parameters in the order the Java SDK's
// Aws4Signer adds them, the version and user agent, then the host header. Two keys in one
// bucket of the HashMap iterate in this order.
var payloadKeys = []string{"action", "x-amz-security-token", "x-amz-algorithm", "x-amz-date", "x-amz-signedheaders",
	"x-amz-expires", "x-amz-credential", "x-amz-signature", "version", "user-agent", "host"}

// jsonObject writes kv as a JSON object with its keys in the order a java.util.HashMap of
// them iterates (AWS4SignedPayloadGenerator fills a HashMap, which Jackson writes as it
// iterates): the Java library's payload, byte for byte. The broker reads either order.
func jsonObject(kv map[string]string) []byte {
	keys := make([]string, 0, len(kv))
	for _, k := range payloadKeys {
		if _, ok := kv[k]; ok {
			keys = append(keys, k)
		}
	}
	for k := range kv {
		if !slices.Contains(payloadKeys, k) {
			keys = append(keys, k) // none: every parameter the signer adds is listed
		}
	}
	var b bytes.Buffer
	b.WriteByte('{')
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // Jackson leaves <, > and & alone
	for i, k := range javaHashMapOrder(keys) {
		if i > 0 {
			b.WriteByte(',')
		}
		_ = enc.Encode(k)       // strings always encode
		b.Truncate(b.Len() - 1) // Encode's newline
		b.WriteByte(':')
		_ = enc.Encode(kv[k])
		b.Truncate(b.Len() - 1)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// javaHashMapOrder returns keys, given in insertion order, in the order a `new HashMap<>()`
// they were put into iterates them: by bucket, the low bits of the spread hash (HashMap.hash)
// over a table of 16 doubled whenever the entries pass three quarters of it, and within a
// bucket in insertion order (a resize keeps it).
func javaHashMapOrder(keys []string) []string {
	capacity := 16
	for len(keys) > capacity*3/4 {
		capacity *= 2
	}
	out := slices.Clone(keys)
	mask := uint32(capacity - 1)
	slices.SortStableFunc(out, func(a, b string) int {
		return int(javaHashMapSpread(a)&mask) - int(javaHashMapSpread(b)&mask)
	})
	return out
}

// javaHashMapSpread is java.util.HashMap.hash: String.hashCode (s[0]*31^(n-1) + ... over the
// UTF-16 code units, in int32 arithmetic) with its high half folded into its low one.
func javaHashMapSpread(s string) uint32 {
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	return uint32(h) ^ uint32(h)>>16
}
