package producer

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// Set assigns one property by its Java name, as a java.util.Properties file or kcat's
// `-X key=value` would: the value is parsed for the property's type, and an unknown key or a
// value of the wrong type is an error that names the key.
func (c *Config) Set(key, value string) error {
	f, ok := configFields()[key]
	if !ok {
		return &ConfigError{Key: key, Reason: "unknown producer property"}
	}
	v := reflect.ValueOf(c).Elem().FieldByIndex(f.index)
	value = strings.TrimSpace(value)
	switch v.Kind() {
	case reflect.String:
		v.SetString(value)
	case reflect.Bool:
		b, err := strconv.ParseBool(value)
		if err != nil {
			return &ConfigError{Key: key, Reason: fmt.Sprintf("want true or false, got %q", value)}
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(value, 10, v.Type().Bits())
		if err != nil {
			return &ConfigError{Key: key, Reason: fmt.Sprintf("want an integer, got %q", value)}
		}
		v.SetInt(n)
	case reflect.Float64:
		f, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return &ConfigError{Key: key, Reason: fmt.Sprintf("want a number, got %q", value)}
		}
		v.SetFloat(f)
	case reflect.Slice: // []string: comma-separated, as bootstrap.servers is in Java
		var parts []string
		for _, p := range strings.Split(value, ",") {
			if p = strings.TrimSpace(p); p != "" {
				parts = append(parts, p)
			}
		}
		v.Set(reflect.ValueOf(parts))
	default:
		return &ConfigError{Key: key, Reason: "property of unsupported type " + v.Type().String()}
	}
	return nil
}

// SetAll assigns every property of props (see Set), in key order so errors are stable.
func (c *Config) SetAll(props map[string]string) error {
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := c.Set(k, props[k]); err != nil {
			return err
		}
	}
	return nil
}

// Property describes one configuration property for references and `agent check`.
type Property struct {
	Key     string
	Default string
	Doc     string
	Secret  bool // never print its value
}

// Properties lists every property with its default and description, in declaration order.
func Properties() []Property {
	def := DefaultConfig()
	v := reflect.ValueOf(def)
	t := v.Type()
	var out []Property
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		key := f.Tag.Get("koanf")
		if key == "" {
			continue
		}
		out = append(out, Property{
			Key:     key,
			Default: formatValue(v.Field(i)),
			Doc:     f.Tag.Get("doc"),
			Secret:  f.Tag.Get("secret") == "true",
		})
	}
	return out
}

// Values returns every property's current value as a string, secrets masked, for
// `agent check` and logs.
func (c *Config) Values() []Property {
	v := reflect.ValueOf(*c)
	props := Properties()
	for i := range props {
		fv := v.FieldByIndex(configFields()[props[i].Key].index)
		props[i].Default = formatValue(fv)
		if props[i].Secret && props[i].Default != "" {
			props[i].Default = "[redacted]"
		}
	}
	return props
}

func formatValue(v reflect.Value) string {
	if v.Kind() == reflect.Slice {
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = fmt.Sprint(v.Index(i).Interface())
		}
		return strings.Join(parts, ",")
	}
	return fmt.Sprint(v.Interface())
}

type configField struct{ index []int }

// configFields maps each Java property name to its struct field.
func configFields() map[string]configField {
	t := reflect.TypeOf(Config{})
	m := make(map[string]configField, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		if key := t.Field(i).Tag.Get("koanf"); key != "" {
			m[key] = configField{index: t.Field(i).Index}
		}
	}
	return m
}
