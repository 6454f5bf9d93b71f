// Package configs holds factgate's example configuration files; its test decodes
// every one of them.
package configs
