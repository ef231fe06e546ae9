package ddbmodel

import (
	"math/big"
	"regexp"
	"strings"
)

// DynamoDB's numbers (the Developer Guide, "Service, account, and table
// quotas", Data types: Number): up to 38 significant digits, magnitudes
// from 1E-130 to 9.9999999999999999999999999999999999999E+125, and zero.
// A number outside them is refused where it is given (an item, a key, an
// expression attribute value) and where an update computes it (SET with +
// or -, ADD), with DynamoDB Local 3.3.1's messages (TestRefusals).
const (
	maxDigits   = 38
	maxExponent = 125  // of the highest digit: below 1E126
	minExponent = -130 // of the highest digit: at least 1E-130
)

const (
	msgNotANumber = "A value provided cannot be converted into a number"
	msgPrecision  = "DynamoDB only supports precision up to 38 digits"
	msgOverflow   = "Number overflow. Attempting to store a number with magnitude larger than supported range"
	msgUnderflow  = "Number underflow. Attempting to store a number with magnitude smaller than supported range"
)

// numberSyntax is the text DynamoDB reads as a number: an optional sign,
// digits with an optional fraction (either side of the point may be
// empty, not both), an optional exponent. No spaces, no hexadecimal, no
// underscores, no fractions a/b.
var numberSyntax = regexp.MustCompile(`^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$`)

// decimal is an exact decimal number, coef × 10^exp, kept normalised:
// coef has no trailing zero digit, and zero is 0 × 10^0.
type decimal struct {
	coef *big.Int
	exp  int
}

// parseDecimal reads a number's text; ok is false for text DynamoDB
// cannot convert into a number. It does not check precision or range.
func parseDecimal(s string) (decimal, bool) {
	if !numberSyntax.MatchString(s) || len(s) > 1000 {
		return decimal{}, false
	}
	mant, expText := s, ""
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, expText = s[:i], s[i+1:]
	}
	exp := 0
	if expText != "" {
		e, ok := new(big.Int).SetString(expText, 10)
		if !ok || !e.IsInt64() || e.Int64() > 1<<20 || e.Int64() < -(1<<20) {
			return decimal{}, false
		}
		exp = int(e.Int64())
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart, "+-") + frac
	exp -= len(frac)
	coef, ok := new(big.Int).SetString(digits, 10)
	if !ok {
		return decimal{}, false
	}
	if strings.HasPrefix(mant, "-") {
		coef.Neg(coef)
	}
	return decimal{coef: coef, exp: exp}.normal(), true
}

func (d decimal) normal() decimal {
	if d.coef.Sign() == 0 {
		return decimal{coef: new(big.Int), exp: 0}
	}
	ten := big.NewInt(10)
	q, r := new(big.Int), new(big.Int)
	c := new(big.Int).Set(d.coef)
	for {
		q.QuoRem(c, ten, r)
		if r.Sign() != 0 {
			return decimal{coef: c, exp: d.exp}
		}
		c.Set(q)
		d.exp++
	}
}

// digits is the number of significant digits (0 for zero).
func (d decimal) digits() int {
	if d.coef.Sign() == 0 {
		return 0
	}
	return len(new(big.Int).Abs(d.coef).String())
}

// check returns the message DynamoDB refuses the number with, or "".
// Precision is checked first, as DynamoDB Local does: the sum of two
// numbers of 38 nines at the top of the range has 39 digits, and is
// refused for its digits, not its magnitude.
func (d decimal) check() string {
	n := d.digits()
	if n == 0 {
		return ""
	}
	switch top := n - 1 + d.exp; {
	case n > maxDigits:
		return msgPrecision
	case top > maxExponent:
		return msgOverflow
	case top < minExponent:
		return msgUnderflow
	}
	return ""
}

// String is DynamoDB's form of a number, as DynamoDB Local returns it:
// plain decimal notation, no exponent, no leading or trailing zeros, no
// plus sign, and 0 for every zero ("-0.000" included).
func (d decimal) String() string {
	if d.coef.Sign() == 0 {
		return "0"
	}
	sign := ""
	abs := new(big.Int).Abs(d.coef).String()
	if d.coef.Sign() < 0 {
		sign = "-"
	}
	switch {
	case d.exp >= 0:
		return sign + abs + strings.Repeat("0", d.exp)
	case -d.exp < len(abs):
		return sign + abs[:len(abs)+d.exp] + "." + abs[len(abs)+d.exp:]
	default:
		return sign + "0." + strings.Repeat("0", -d.exp-len(abs)) + abs
	}
}

// add returns d + e (or d - e with neg), exactly.
func (d decimal) add(e decimal, neg bool) decimal {
	exp := min(d.exp, e.exp)
	scale := func(x decimal) *big.Int {
		return new(big.Int).Mul(x.coef, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(x.exp-exp)), nil))
	}
	a, b := scale(d), scale(e)
	if neg {
		b.Neg(b)
	}
	return decimal{coef: a.Add(a, b), exp: exp}.normal()
}

// canonicalN returns DynamoDB's form of a number's text, without checking
// its precision or range; ok is false for text that is not a number.
func canonicalN(s string) (string, bool) {
	d, ok := parseDecimal(s)
	if !ok {
		return "", false
	}
	return d.String(), true
}

// checkNumber validates a number DynamoDB is given or computes and
// returns its canonical text, or the ValidationException's message.
func checkNumber(s string) (string, string) {
	d, ok := parseDecimal(s)
	if !ok {
		return "", msgNotANumber
	}
	if msg := d.check(); msg != "" {
		return "", msg
	}
	return d.String(), ""
}
