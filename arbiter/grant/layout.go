package grant

// Layout constants of the grant region, version 1.0. They mirror
// intercept/src/shm_layout.h; layout_test.go checks them against it.
const (
	Magic        uint32 = 0x52475354 // "TSGR"
	VersionMajor uint16 = 1
	VersionMinor uint16 = 0
	HeaderSize          = 64
	RecordSize          = 64
	MaxDevices          = 16
	// DefaultStaleAfterMs is what the library assumes when stale_after_ms is 0.
	DefaultStaleAfterMs = 2000

	offMagic        = 0
	offVersionMajor = 4
	offVersionMinor = 6
	offHeaderSize   = 8
	offRecordSize   = 12
	offNdev         = 16
	offStaleAfterMs = 20
	offHeartbeat    = 24
	offEpoch        = 32

	offTokens  = 0
	offWaiters = 8
	offWaits   = 16
	offUngated = 24
)

// Size is the file size for ndev records.
func Size(ndev int) int { return HeaderSize + ndev*RecordSize }
