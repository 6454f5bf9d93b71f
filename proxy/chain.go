package proxy

// RouteInterceptors holds the configuration blocks of a route's interceptors. A
// block that is present turns its interceptor on for the route.
type RouteInterceptors struct{}
