package svcsdk

import (
	"encoding/json"
	"errors"
)

type jsonNum = json.Number

func asErr[T error](err error, target *T) bool { return errors.As(err, target) }

func jsonNumber(s string) any { return jsonNum(s) }
