package v1alpha1

import "bytes"

// MarshalJSON writes the value as it is; an empty value is null.
func (j JSON) MarshalJSON() ([]byte, error) {
	if len(j.Raw) == 0 {
		return []byte("null"), nil
	}
	return j.Raw, nil
}

// UnmarshalJSON keeps a copy of the value; null leaves it empty.
func (j *JSON) UnmarshalJSON(data []byte) error {
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		j.Raw = nil
		return nil
	}
	j.Raw = append(j.Raw[:0], data...)
	return nil
}

// OpenAPISchemaType is nil: the value may be of any JSON type, so the schema
// names none, as apiextensions' JSON does. kube-openapi's generator reads it.
func (JSON) OpenAPISchemaType() []string { return nil }

// OpenAPISchemaFormat is empty, as the type is.
func (JSON) OpenAPISchemaFormat() string { return "" }
