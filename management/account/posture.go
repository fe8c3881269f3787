package account

// PostureCheckID identifies a posture check.
type PostureCheckID string

// PostureCheck is a named set of conditions on a peer. A policy that names
// it applies only to source peers that meet every condition.
type PostureCheck struct {
	ID          PostureCheckID `json:"id"`
	AccountID   ID             `json:"account_id"`
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Checks      Checks         `json:"checks"`
}

// Checks are the conditions; nil ones are not checked.
type Checks struct {
	NBVersion        *MinVersion        `json:"nb_version_check,omitempty"`
	OSVersion        *OSVersionCheck    `json:"os_version_check,omitempty"`
	GeoLocation      *GeoLocationCheck  `json:"geo_location_check,omitempty"`
	PeerNetworkRange *NetworkRangeCheck `json:"peer_network_range_check,omitempty"`
	Process          *ProcessCheck      `json:"process_check,omitempty"`
}

// MinVersion is a lowest acceptable version.
type MinVersion struct {
	MinVersion string `json:"min_version"`
}

// MinKernel is a lowest acceptable kernel version.
type MinKernel struct {
	MinKernelVersion string `json:"min_kernel_version"`
}

// OSVersionCheck sets a minimum per operating system; a peer on an OS not
// listed fails it.
type OSVersionCheck struct {
	Android *MinVersion `json:"android,omitempty"`
	Darwin  *MinVersion `json:"darwin,omitempty"`
	IOS     *MinVersion `json:"ios,omitempty"`
	Linux   *MinKernel  `json:"linux,omitempty"`
	Windows *MinKernel  `json:"windows,omitempty"`
}

// GeoLocationCheck allows or denies peers by the location of their public IP.
type GeoLocationCheck struct {
	Locations []Location `json:"locations"`
	Action    string     `json:"action"` // allow or deny
}

// Location is a country, or a city in it.
type Location struct {
	CountryCode string `json:"country_code"`
	CityName    string `json:"city_name,omitempty"`
}

// NetworkRangeCheck allows or denies peers with an address in the ranges.
type NetworkRangeCheck struct {
	Ranges []string `json:"ranges"`
	Action string   `json:"action"` // allow or deny
}

// ProcessCheck requires processes to be running on the peer.
type ProcessCheck struct {
	Processes []Process `json:"processes"`
}

// Process is one program, by its path on each OS.
type Process struct {
	LinuxPath   string `json:"linux_path,omitempty"`
	MacPath     string `json:"mac_path,omitempty"`
	WindowsPath string `json:"windows_path,omitempty"`
}

// FileState is what a peer reports about a file posture checks ask for.
type FileState struct {
	Path             string `json:"path"`
	Exist            bool   `json:"exist"`
	ProcessIsRunning bool   `json:"process_is_running"`
}
