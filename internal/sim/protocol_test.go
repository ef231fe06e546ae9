package sim

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DynamoDB's JSON protocol, as simTransport (transport_test.go) speaks it:
// SDK inputs decoded from a request body, outputs and errors encoded into
// a response body, by reflection over the SDK's types (their field names
// are the protocol's member names).

var (
	avType   = reflect.TypeFor[types.AttributeValue]()
	timeType = reflect.TypeFor[time.Time]()
)

// toJSON turns an SDK value into what encoding/json writes as DynamoDB's
// JSON protocol: structs as objects of their set fields (ResultMetadata
// left out), attribute values as {"S": ...}, times as epoch seconds.
func toJSON(v reflect.Value) any {
	if v.Type() == avType {
		if v.IsNil() {
			return nil
		}
		return avJSON(v.Interface().(types.AttributeValue))
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return toJSON(v.Elem())
	case reflect.Struct:
		if v.Type() == timeType {
			return float64(v.Interface().(time.Time).UnixNano()) / 1e9
		}
		m := map[string]any{}
		for i := range v.NumField() {
			fld := v.Type().Field(i)
			if !fld.IsExported() || fld.Name == "ResultMetadata" {
				continue
			}
			fv := v.Field(i)
			if (fv.Kind() == reflect.Pointer || fv.Kind() == reflect.Map || fv.Kind() == reflect.Slice || fv.Kind() == reflect.Interface) && fv.IsNil() ||
				fv.Kind() == reflect.String && fv.String() == "" {
				continue
			}
			m[fld.Name] = toJSON(fv)
		}
		return m
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return v.Bytes()
		}
		out := make([]any, v.Len())
		for i := range out {
			out[i] = toJSON(v.Index(i))
		}
		return out
	case reflect.Map:
		out := map[string]any{}
		for _, k := range v.MapKeys() {
			out[k.String()] = toJSON(v.MapIndex(k))
		}
		return out
	}
	return v.Interface()
}

func avJSON(av types.AttributeValue) any {
	switch v := av.(type) {
	case *types.AttributeValueMemberS:
		return map[string]any{"S": v.Value}
	case *types.AttributeValueMemberN:
		return map[string]any{"N": v.Value}
	case *types.AttributeValueMemberB:
		return map[string]any{"B": v.Value}
	case *types.AttributeValueMemberBOOL:
		return map[string]any{"BOOL": v.Value}
	case *types.AttributeValueMemberNULL:
		return map[string]any{"NULL": v.Value}
	case *types.AttributeValueMemberSS:
		return map[string]any{"SS": v.Value}
	case *types.AttributeValueMemberNS:
		return map[string]any{"NS": v.Value}
	case *types.AttributeValueMemberBS:
		return map[string]any{"BS": v.Value}
	case *types.AttributeValueMemberL:
		l := make([]any, len(v.Value))
		for i, e := range v.Value {
			l[i] = avJSON(e)
		}
		return map[string]any{"L": l}
	case *types.AttributeValueMemberM:
		m := map[string]any{}
		for k, e := range v.Value {
			m[k] = avJSON(e)
		}
		return map[string]any{"M": m}
	}
	return nil
}

// fromJSON fills v (an SDK input, addressable) from decoded JSON.
func fromJSON(v reflect.Value, j any) error {
	if j == nil {
		return nil
	}
	if v.Type() == avType {
		av, err := avFromJSON(j)
		if err != nil {
			return err
		}
		v.Set(reflect.ValueOf(av))
		return nil
	}
	switch v.Kind() {
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		if err := fromJSON(p.Elem(), j); err != nil {
			return err
		}
		v.Set(p)
	case reflect.Struct:
		m, ok := j.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: not an object", v.Type())
		}
		for name, jv := range m {
			f := v.FieldByName(name)
			if !f.IsValid() || !f.CanSet() {
				return fmt.Errorf("%s has no field %s", v.Type(), name)
			}
			if err := fromJSON(f, jv); err != nil {
				return fmt.Errorf("%s.%s: %w", v.Type(), name, err)
			}
		}
	case reflect.String:
		s, ok := j.(string)
		if !ok {
			return fmt.Errorf("not a string")
		}
		v.SetString(s)
	case reflect.Bool:
		b, ok := j.(bool)
		if !ok {
			return fmt.Errorf("not a bool")
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int32, reflect.Int64:
		n, err := j.(json.Number).Int64()
		if err != nil {
			return err
		}
		v.SetInt(n)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			b, err := base64.StdEncoding.DecodeString(j.(string))
			if err != nil {
				return err
			}
			v.SetBytes(b)
			return nil
		}
		l, ok := j.([]any)
		if !ok {
			return fmt.Errorf("not a list")
		}
		s := reflect.MakeSlice(v.Type(), len(l), len(l))
		for i, e := range l {
			if err := fromJSON(s.Index(i), e); err != nil {
				return err
			}
		}
		v.Set(s)
	case reflect.Map:
		m, ok := j.(map[string]any)
		if !ok {
			return fmt.Errorf("not an object")
		}
		out := reflect.MakeMapWithSize(v.Type(), len(m))
		for k, e := range m {
			ev := reflect.New(v.Type().Elem()).Elem()
			if err := fromJSON(ev, e); err != nil {
				return err
			}
			out.SetMapIndex(reflect.ValueOf(k).Convert(v.Type().Key()), ev)
		}
		v.Set(out)
	default:
		return fmt.Errorf("unsupported kind %s", v.Kind())
	}
	return nil
}

func avFromJSON(j any) (types.AttributeValue, error) {
	m, ok := j.(map[string]any)
	if !ok || len(m) != 1 {
		return nil, fmt.Errorf("not an attribute value: %v", j)
	}
	strs := func(x any) []string {
		var out []string
		for _, e := range x.([]any) {
			out = append(out, e.(string))
		}
		return out
	}
	for k, x := range m {
		switch k {
		case "S":
			return &types.AttributeValueMemberS{Value: x.(string)}, nil
		case "N":
			return &types.AttributeValueMemberN{Value: x.(string)}, nil
		case "B":
			b, err := base64.StdEncoding.DecodeString(x.(string))
			return &types.AttributeValueMemberB{Value: b}, err
		case "BOOL":
			return &types.AttributeValueMemberBOOL{Value: x.(bool)}, nil
		case "NULL":
			return &types.AttributeValueMemberNULL{Value: x.(bool)}, nil
		case "SS":
			return &types.AttributeValueMemberSS{Value: strs(x)}, nil
		case "NS":
			return &types.AttributeValueMemberNS{Value: strs(x)}, nil
		case "BS":
			var bs [][]byte
			for _, s := range strs(x) {
				b, err := base64.StdEncoding.DecodeString(s)
				if err != nil {
					return nil, err
				}
				bs = append(bs, b)
			}
			return &types.AttributeValueMemberBS{Value: bs}, nil
		case "L":
			var l []types.AttributeValue
			for _, e := range x.([]any) {
				av, err := avFromJSON(e)
				if err != nil {
					return nil, err
				}
				l = append(l, av)
			}
			return &types.AttributeValueMemberL{Value: l}, nil
		case "M":
			mm := map[string]types.AttributeValue{}
			for name, e := range x.(map[string]any) {
				av, err := avFromJSON(e)
				if err != nil {
					return nil, err
				}
				mm[name] = av
			}
			return &types.AttributeValueMemberM{Value: mm}, nil
		}
	}
	return nil, fmt.Errorf("unknown attribute value type in %v", j)
}
