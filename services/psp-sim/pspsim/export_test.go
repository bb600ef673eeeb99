package pspsim

// MaxPerCharge exposes maxPerCharge to the external tests.
const MaxPerCharge = maxPerCharge
