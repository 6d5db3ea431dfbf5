package engine

// HealthMaxAge is healthMaxAge, for the tests of the bound it sets.
const HealthMaxAge = healthMaxAge
